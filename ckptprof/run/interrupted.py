"""A replay cut short (Ctrl-C, SIGTERM, a rank's interrupt) keeps what it measured and says where it stopped."""

from __future__ import annotations

import dataclasses

from ckptprof import interrupts
from ckptprof.loader import ranks as ranks_mod
from ckptprof.loader.plan import ReplayPlan
from ckptprof.results import Ceilings
from ckptprof.run.cache_prep import model_info
from ckptprof.session import Session
from ckptprof.session_config import Interrupted


class InterruptedReplay(Exception):
    """Raised by a replay that was interrupted; ``session`` is the partial session (its verdict says so)."""

    def __init__(self, session: Session) -> None:
        super().__init__("interrupted")
        self.session = session


def keep_partial(session: Session, plan: ReplayPlan, stage: str, exc: BaseException) -> None:
    """An interrupted replay keeps what it measured and says where it stopped."""
    how = interrupts.description()
    if isinstance(exc, ranks_mod.Interrupted):
        if stage == "replay":
            session.ranks = exc.results
        elif stage == "warm pass":
            session.notes.append(
                "the warm pass was interrupted: the cold load is complete, storage's cost (cold minus warm) was not "
                "measured"
            )
        else:
            # The faithful pass was cut: the decomposed results stand, the faithful walls are incomplete.
            session.notes.append(
                "the faithful pass was interrupted: its walls are missing or partial, the decomposed pass is complete"
            )
    if not session.models:  # stopped before the cache was prepared: the models as planned, nothing found
        session.models = [
            model_info(m, None, f"not prepared: interrupted during the {stage}") for m in plan.models
        ]
    if stage == "probe" and session.ceilings != Ceilings():
        cut = f"probe interrupted ({how}): only the ceilings measured before it are present"
        session.ceilings = dataclasses.replace(session.ceilings, notes=(*session.ceilings.notes, cut))
    session.extra.interrupted = Interrupted(stage=stage, by=how)
    session.notes.append(f"interrupted ({how}) during the {stage}: partial session")
