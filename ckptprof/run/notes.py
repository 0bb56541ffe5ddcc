"""What every analysed session says besides its figures: the notes each report must carry, then the verdict."""

from __future__ import annotations

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.engines import flags as sglang_flags
from ckptprof.session import Session


def add_notes_and_verdict(session: Session, warmed_again: bool = False) -> None:
    """Notes that every report must carry, then the verdict. ``warmed_again``: a warm pass followed the cold
    load (``--cache cold,warm``), so the pages are in the page cache again."""
    devices = session.config.devices or []
    if not any(str(d).startswith("cuda") for d in devices):
        session.notes.append(
            "no CUDA device: 'h2d' times are host-memory copies standing in for host-to-device transfers"
        )
    if session.config.ranks_share_devices:
        session.notes.append(
            f"{session.config.tp} ranks shared {len(devices)} device(s): copies of different ranks contend "
            "for the same link"
        )
    if session.config.cache == "cold":
        dropped = [m for m in session.models if m.cache_note]
        after = (
            "its warm pass then read them in again"
            if warmed_again
            else "a server started next will read them from storage again"
        )
        session.notes.append(
            f"cold cache: this run dropped the checkpoint's pages from the page cache before replaying ({after})"
        )
        for m in dropped:
            if m.cache_note.startswith("could not"):
                session.notes.append(f"{m.role}: {m.cache_note}")
    failed = [r for r in session.ranks if r.status != "ok" or r.error]
    for r in failed:
        session.notes.append(f"rank {r.rank} ({r.device}): {r.status}: {r.error}")
    session.verdict = compute_verdict(session)


def draft_flags(flags: str) -> str:
    """A load-format strategy's flags as they select the draft's format (``--speculative-draft-load-format``)."""
    return sglang_flags.as_draft(flags)
