"""The terminal lines of `ckptprof run --cache cold,warm`: what storage cost the cold load (cold minus warm), beside
the storage share the attribution gives it (issue #34 item 2)."""

from __future__ import annotations

from typing import Any

from ckptprof.run.faithful import engine_title
from ckptprof.run.referee import KEY
from ckptprof.session import Session


def _shares(shares: Any) -> str:
    """'63% sampled, 58% decomposed' (the sampled share first: it is the one of the engine's own wall)."""
    if not isinstance(shares, dict):
        return "none"
    parts = [
        f"{shares[kind]:.0%} {kind}" for kind in ("sampled", "decomposed") if shares.get(kind) is not None
    ]
    return ", ".join(parts) or "none"


def referee_lines(session: Session) -> list[str]:
    """Two lines when the run refereed its cold load with a warm one, else none."""
    record = session.extra.get(KEY)
    if not isinstance(record, dict):
        return []
    which = (
        f"{engine_title(session.config)}'s own sequence" if record.get("pass") == "faithful" else "decomposed"
    )
    cold, warm, cost = record["cold_wall_s"], record["warm_wall_s"], record["storage_cost_s"]
    share = record.get("storage_share")
    of_cold = f", {share:.0%} of the cold load" if share is not None else " (no cold wall to compare)"
    first = (
        f"cold vs warm ({which}): cold {cold:.2f} s, warm {warm:.2f} s: storage cost {cost:.2f} s{of_cold}"
    )
    if record.get("incomplete"):
        first += " (incomplete: the walls cover the completed work only)"
    second = (
        f"  storage's share by the attribution: cold load {_shares(record.get('attributed_storage_share'))}; "
        f"warm load {_shares(record.get('warm_attributed_storage_share'))}"
    )
    return [first, second]
