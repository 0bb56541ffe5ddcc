"""``--cache cold,warm``: the same load from a cold page cache and then from a warm one, in one run, as a referee
for the attribution. What the cold load took beyond the warm one is what storage cost it; the attribution (the
decomposed pass's storage share, and with ``--sample-threads`` the kernel-sampled share of SGLang's own wall)
claims a share of the cold load for storage, and the two should agree.

The figures go into the cold session's ``extra.cache_referee`` (a ``CacheReferee``; docs/how-it-measures.md names
every field).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ckptprof.analysis.attribution import faithful_load_wall, load_wall
from ckptprof.errors import UsageError
from ckptprof.loader.options import COLD_THEN_WARM
from ckptprof.session import Session
from ckptprof.session_config import CacheReferee, StorageShares

KEY = "cache_referee"


def check_cold_possible(paths: Sequence[Path]) -> None:
    """Refuse, before anything is replayed, a referee whose cold load cannot be cold here (the page cache cannot
    be dropped, or the drop cannot be verified): its storage cost would be a difference of two warm loads."""
    from ckptprof.checkpoint import fs

    try:
        result = fs.drop_cache(paths)
    except OSError as exc:
        raise UsageError(
            f"--cache {COLD_THEN_WARM}: cannot drop the checkpoint's pages here: {exc}"
        ) from None
    if not result.ok:
        raise UsageError(
            f"--cache {COLD_THEN_WARM}: the checkpoint cannot be loaded cold here ({result.note}), so a warm "
            "load has nothing to be held against"
        )


def compared_pass(cold: Session) -> str:
    """The pass whose walls the referee compares: SGLang's own sequence when it ran (the load a server does, and
    the one the sampled shares describe), else the decomposed pass."""
    return "faithful" if faithful_load_wall(cold) > 0 else "decomposed"


def _wall(session: Session, which: str) -> float:
    return faithful_load_wall(session) if which == "faithful" else load_wall(session)


def _storage_shares(session: Session) -> StorageShares:
    """The attribution's storage share of a session's load: decomposed, and sampled where the threads were."""
    verdict = session.verdict
    out = StorageShares()
    if verdict is None:
        return out
    if "storage" in verdict.shares:
        out.decomposed = round(verdict.shares["storage"], 4)
    if verdict.sampled_shares and "storage" in verdict.sampled_shares:
        out.sampled = round(verdict.sampled_shares["storage"], 4)
    return out


def record(cold: Session, warm: Session) -> CacheReferee:
    """The referee's figures, from the cold session and the warm one (both analysed)."""
    which = compared_pass(cold)
    cold_s, warm_s = _wall(cold, which), _wall(warm, which)
    cost = cold_s - warm_s
    incomplete = [
        *(cold.verdict.incomplete if cold.verdict else ()),
        *(warm.verdict.incomplete if warm.verdict else ()),
    ]
    return CacheReferee(
        pass_=which,
        cold_wall_s=round(cold_s, 4),
        warm_wall_s=round(warm_s, 4),
        storage_cost_s=round(cost, 4),
        storage_share=round(cost / cold_s, 4) if cold_s > 0 else None,
        attributed_storage_share=_storage_shares(cold),
        warm_attributed_storage_share=_storage_shares(warm),
        warm_cache_notes=[m.cache_note for m in warm.models],
        incomplete=incomplete,
    )


def attach(cold: Session, warm: Session) -> None:
    """Keep the referee's figures in the cold session, say where they come from, and analyse the cold session
    again: the verdict trusts cold minus warm over the attributions (``analysis/storage.py``)."""
    from ckptprof.analysis.verdict import compute_verdict

    cold.extra.cache_referee = record(cold, warm)
    cold.notes.append(
        f"--cache {COLD_THEN_WARM}: the same load ran warm after this cold one; what the cold load took beyond "
        "the warm one is what storage cost it"
    )
    for r in warm.ranks:
        if r.status != "ok" or r.error:
            cold.notes.append(f"warm pass: rank {r.rank} ({r.device}): {r.status}: {r.error}")
    cold.verdict = compute_verdict(cold)
