"""A rank's host memory against the checkpoint's largest shard. Pure functions over a Session."""

from __future__ import annotations

from dataclasses import dataclass

from ckptprof.session import Session
from ckptprof.units import human_bytes


@dataclass(frozen=True)
class RankMemory:
    rank: int
    peak_rss_bytes: int  # over the rank process's life
    before_load_bytes: int  # resident when the load started (0: not recorded)
    load_peak_bytes: int  # peak during the load alone (0: not recorded)

    @property
    def load_growth_bytes(self) -> int | None:
        """What the load itself added on top of the rank's set-up, where both ends were recorded."""
        if self.before_load_bytes <= 0 or self.load_peak_bytes <= 0:
            return None
        return max(0, self.load_peak_bytes - self.before_load_bytes)


def largest_shard_bytes(session: Session) -> int:
    return max((s.bytes for m in session.models for s in m.shards), default=0)


def worst_rank(session: Session) -> RankMemory | None:
    """The rank with the highest peak resident set."""
    ranks = [
        RankMemory(r.rank, r.peak_rss_bytes, r.rss_before_load_bytes, r.load_peak_rss_bytes)
        for r in session.ranks
        if r.peak_rss_bytes > 0
    ]
    return max(ranks, key=lambda m: m.peak_rss_bytes, default=None)


def memory_summary(session: Session) -> str | None:
    """One line: the worst rank's peak RSS during the load (what it held before, what the load added), its peak
    over the process's life apart (the probe's buffers, the CUDA context), the largest shard."""
    m = worst_rank(session)
    if m is None:
        return None
    growth = m.load_growth_bytes
    if growth is None:  # sessions from before the load's own peak was recorded
        parts = [f"rank {m.rank} peak RSS {human_bytes(m.peak_rss_bytes)} over the process's life"]
    else:
        parts = [
            f"rank {m.rank} peak RSS during the load {human_bytes(m.load_peak_bytes)} "
            f"({human_bytes(m.before_load_bytes)} resident when it started: context, libraries, buffers; "
            f"+{human_bytes(growth)} during the load)"
        ]
        if m.peak_rss_bytes > m.load_peak_bytes:
            # ru_maxrss counts what the process held before the load too: the probe's buffers, an earlier pass.
            parts.append(
                f"the process peaked at {human_bytes(m.peak_rss_bytes)} outside the load (the probe's buffers, "
                "earlier passes)"
            )
    largest = largest_shard_bytes(session)
    if largest:
        parts.append(f"largest shard {human_bytes(largest)}")
    return "; ".join(parts)
