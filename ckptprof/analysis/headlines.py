"""The headline of each model a run loaded (target, draft): how long its load took, which limit bound it with the
figure that shows it, and the one thing to try - each model judged on its own ranks' timings, not the pair's.

Every report opens with these lines (terminal, Markdown, HTML), built here once. Pure: reads a Session.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

# The package, not its steps: 'classify' is a step's module name as well as the function.
from ckptprof.analysis import verdict as judge
from ckptprof.analysis.attribution import checkpoint_bytes
from ckptprof.results import Prediction
from ckptprof.session import Session


@dataclass(frozen=True)
class ModelHeadline:
    """One model's verdict, from its own ranks' timings against the run's ceilings."""

    role: str
    # The model's load wall: its slowest rank's.
    wall_s: float
    bytes: int
    ranks: int
    # The verdict's word for the limit (the JSON's: "storage", "h2d", ...), and the word every view shows for it.
    bottleneck: str
    limit: str
    # The figure that shows the limit ("storage reads took 54% of rank time, ...").
    figure: str
    # The fastest remedy predicted to help this model's load; None when nothing is.
    remedy: Prediction | None
    # Whether the remedies could be priced at all (a run with --no-probe has no ceilings to price them from).
    priced: bool


def model_roles(session: Session) -> list[str]:
    """The roles that have timings, in load order."""
    return list(dict.fromkeys(m.role for r in session.ranks for m in r.models))


def model_session(session: Session, role: str) -> Session:
    """``session`` cut down to one model: its checkpoint and each rank's timings of it, the run's ceilings kept.
    The draft is judged under its own loading path when the run gave it one."""
    config = copy.copy(session.config)
    if role == "draft" and config.draft_strategy:
        config.strategy = config.draft_strategy
    return replace(
        session,
        config=config,
        models=[m for m in session.models if m.role == role],
        ranks=[replace(r, models=[m for m in r.models if m.role == role]) for r in session.ranks],
        verdict=None,
        strategies=None,
    )


def model_headline(session: Session, role: str) -> ModelHeadline:
    one = model_session(session, role)
    verdict = judge.compute_verdict(one)
    fig = judge.read_figures(one)
    cls = judge.classify(fig, bool(one.ranks))
    remedy = next((p for p in verdict.predictions if not p.slower_than_now), None)
    return ModelHeadline(
        role=role,
        wall_s=fig.wall,
        bytes=checkpoint_bytes(one),
        ranks=sum(1 for r in one.ranks if r.models),
        bottleneck=cls.bottleneck,
        limit=judge.limit_word(cls.bottleneck, fig.stand_in),
        figure=judge.bound_figure(one, fig, cls),
        remedy=remedy,
        priced=session.ceilings.measured,
    )


def model_headlines(session: Session) -> list[ModelHeadline]:
    """One headline per model with timings, in load order (empty for a run that timed nothing)."""
    return [model_headline(session, role) for role in model_roles(session)]
