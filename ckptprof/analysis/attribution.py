"""Where the time went: per rank, per model and for the whole run. Pure functions over a Session."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from ckptprof.session import RankModel, Session, ShardTiming


@dataclass(frozen=True)
class PhaseTotals:
    read_s: float = 0.0
    # The part of read_s spent fetching bytes that were not in the page cache (the rest is page-cache time:
    # mapping or copying pages that were already resident).
    storage_read_s: float = 0.0
    deserialize_s: float = 0.0
    h2d_s: float = 0.0
    wall_s: float = 0.0
    bytes: int = 0
    h2d_bytes: int = 0
    storage_bytes: int = 0
    nonresident_bytes: int = 0
    major_faults: int = 0
    shards: int = 0
    failed_shards: int = 0
    # Wall-clock seconds in which some thread read (copied): a second two threads both spent counts once, so bytes
    # over it is the rate they moved at. Summed over models and ranks like the rest. None: no model had them (older
    # sessions), and read_busy / h2d_busy are the phase seconds themselves.
    read_busy_s: float | None = None
    h2d_busy_s: float | None = None

    @property
    def read_busy(self) -> float:
        return self.read_s if self.read_busy_s is None else self.read_busy_s

    @property
    def h2d_busy(self) -> float:
        return self.h2d_s if self.h2d_busy_s is None else self.h2d_busy_s

    @property
    def other_s(self) -> float:
        """Wall time not inside a timed phase: Python bookkeeping, allocator, waiting for the GIL."""
        return max(0.0, self.wall_s - self.read_s - self.deserialize_s - self.h2d_s)

    @property
    def phase_sum_s(self) -> float:
        return self.read_s + self.deserialize_s + self.h2d_s

    def shares(self) -> dict[str, float]:
        """Shares of rank time. ``storage`` + ``page_cache`` is the read phase, split by what was cached.

        Phases that ran one after the other are their own share of the wall. Where they overlapped (read-ahead
        faulting the next tensor in while this one is copied, reader threads), they add up to more than the wall:
        then storage is credited with the time it was busy (at most the wall) and the rest of the wall is split
        over the other phases in proportion to their times - the overlap goes to the resource that bounds the load.
        """
        return overlap_shares(self, max(self.wall_s, self.phase_sum_s))

    def __add__(self, other: PhaseTotals) -> PhaseTotals:
        return PhaseTotals(
            read_s=self.read_s + other.read_s,
            storage_read_s=self.storage_read_s + other.storage_read_s,
            deserialize_s=self.deserialize_s + other.deserialize_s,
            h2d_s=self.h2d_s + other.h2d_s,
            wall_s=self.wall_s + other.wall_s,
            bytes=self.bytes + other.bytes,
            h2d_bytes=self.h2d_bytes + other.h2d_bytes,
            storage_bytes=self.storage_bytes + other.storage_bytes,
            nonresident_bytes=self.nonresident_bytes + other.nonresident_bytes,
            major_faults=self.major_faults + other.major_faults,
            shards=self.shards + other.shards,
            failed_shards=self.failed_shards + other.failed_shards,
            read_busy_s=None
            if self.read_busy_s is None and other.read_busy_s is None
            else self.read_busy + other.read_busy,
            h2d_busy_s=None
            if self.h2d_busy_s is None and other.h2d_busy_s is None
            else self.h2d_busy + other.h2d_busy,
        )


ZERO_SHARES = {"storage": 0.0, "page_cache": 0.0, "deserialize": 0.0, "h2d": 0.0, "other": 0.0}


def overlap_shares(
    t: PhaseTotals, wall: float, other_s: float | None = None, storage_s: float | None = None
) -> dict[str, float]:
    """Shares of ``wall``: storage busy time first (at most the wall), the rest in proportion to the other phases.

    ``other_s`` (time outside the phases) defaults to the wall minus the phases. ``storage_s`` (how long storage
    was busy) defaults to the phases' storage time. With phases that did not overlap, every phase simply gets its
    own time over the wall.
    """
    if wall <= 0:
        return dict(ZERO_SHARES)
    storage = min(t.storage_read_s if storage_s is None else storage_s, wall)
    others = {
        "page_cache": t.read_s - t.storage_read_s,
        "deserialize": t.deserialize_s,
        "h2d": t.h2d_s,
        "other": max(0.0, wall - t.phase_sum_s) if other_s is None else other_s,
    }
    rest = wall - storage
    spread = sum(others.values())
    shares = {"storage": storage / wall}
    for k, v in others.items():
        shares[k] = (v / spread * rest / wall) if spread > 0 else (rest / wall if k == "other" else 0.0)
    return shares


def cold_share(s: ShardTiming) -> float:
    """Fraction of the shard's bytes that had to come from storage: what was not cached when the shard started
    (mincore), or what the kernel counted as fetched for this rank, whichever says more."""
    if s.bytes <= 0:
        return 1.0 if s.nonresident_bytes > 0 or s.storage_bytes > 0 else 0.0
    return min(1.0, max(s.nonresident_bytes, s.storage_bytes) / s.bytes)


def shard_totals(s: ShardTiming) -> PhaseTotals:
    return PhaseTotals(
        read_s=s.read_s,
        storage_read_s=s.read_s * cold_share(s),
        deserialize_s=s.deserialize_s,
        h2d_s=s.h2d_s,
        wall_s=s.wall_s,
        bytes=s.bytes,
        h2d_bytes=s.h2d_bytes,
        storage_bytes=s.storage_bytes,
        nonresident_bytes=s.nonresident_bytes,
        major_faults=s.major_faults,
        shards=1,
        failed_shards=0 if s.status == "ok" else 1,
    )


def model_totals(m: RankModel) -> PhaseTotals:
    """A rank's totals for one model; the wall is the model's wall (it includes time between shards).

    Where the recorder cut the wall into parts (``wall_parts_s``), the phase seconds are those parts: wall-clock
    time that adds up to the wall however many threads ran at once, the read part split into storage and page
    cache in the proportions of the shards' own read times. Otherwise (older sessions) the shards' summed phase
    seconds, which are thread-seconds where threads overlapped."""
    total = PhaseTotals()
    for s in m.shards:
        total = total + shard_totals(s)
    fields = {**total.__dict__, "wall_s": m.wall_s}
    busy = m.busy_s or {}
    if "read" in busy and "h2d" in busy:
        fields.update(read_busy_s=busy["read"], h2d_busy_s=busy["h2d"])
    parts = m.wall_parts_s
    if parts and all(k in parts for k in ("read", "deserialize", "h2d")):
        cold = total.storage_read_s / total.read_s if total.read_s > 0 else 0.0
        fields.update(
            read_s=parts["read"],
            storage_read_s=parts["read"] * cold,
            deserialize_s=parts["deserialize"],
            h2d_s=parts["h2d"],
        )
    return PhaseTotals(**fields)


def rank_totals(session: Session, rank: int, role: str | None = None) -> PhaseTotals:
    total = PhaseTotals()
    for r in session.ranks:
        if r.rank != rank:
            continue
        for m in r.models:
            if role is None or m.role == role:
                total = total + model_totals(m)
    return total


def run_totals(session: Session, role: str | None = None) -> PhaseTotals:
    """Summed over ranks (and models): the basis of the run's phase shares."""
    total = PhaseTotals()
    for r in session.ranks:
        for m in r.models:
            if role is None or m.role == role:
                total = total + model_totals(m)
    return total


def rank_walls(session: Session, role: str | None = None) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in session.ranks:
        if r.status != "ok" and not r.models:
            continue
        out[r.rank] = sum(m.wall_s for m in r.models if role is None or m.role == role)
    return out


def load_wall(session: Session, role: str | None = None) -> float:
    """The load is done when the slowest rank is done."""
    walls = rank_walls(session, role)
    return max(walls.values()) if walls else 0.0


def faithful_load_wall(session: Session) -> float:
    """``load_wall`` of SGLang's own sequence: the slowest rank's faithful walls over its models; 0.0 without
    --faithful."""
    return max((sum(m.faithful_wall_s or 0.0 for m in r.models) for r in session.ranks), default=0.0)


def rank_skew(session: Session) -> float:
    """Slowest rank's wall over the median rank's wall (1.0 = perfectly even)."""
    walls = [w for w in rank_walls(session).values() if w > 0]
    if len(walls) < 2:
        return 1.0
    median = statistics.median(walls)
    return max(walls) / median if median > 0 else 1.0


def checkpoint_bytes(session: Session, role: str | None = None) -> int:
    return sum(m.total_bytes for m in session.models if role is None or m.role == role)


def faithful_delta(session: Session) -> float | None:
    """How far the decomposed walls are from the faithful walls: (decomposed - faithful) / faithful.

    With several alternated passes (``--faithful-rounds``) both sides are the medians of their passes."""
    decomposed = 0.0
    faithful = 0.0
    for r in session.ranks:
        for m in r.models:
            if m.faithful_wall_s:
                decomposed += statistics.median(m.decomposed_walls) if m.decomposed_walls else m.wall_s
                faithful += m.faithful_wall_s
    return (decomposed - faithful) / faithful if faithful > 0 else None


def shard_work_s(s: ShardTiming) -> float:
    """The wall-clock time threads worked on the shard: its wall less the time it queued for a thread (its wall in
    sessions from before queued time was kept)."""
    return s.wall_s if s.work_s is None else s.work_s


def slowest_shards(session: Session, n: int = 5) -> list[tuple[int, str, ShardTiming]]:
    """The ``n`` shards threads worked on longest: a small shard that only waited its turn is not slow."""
    rows = [(r.rank, m.role, s) for r in session.ranks for m in r.models for s in m.shards]
    rows.sort(key=lambda x: -shard_work_s(x[2]))
    return rows[:n]


def _faithful_models(session: Session, role: str | None) -> list[RankModel]:
    return [
        m for r in session.ranks for m in r.models if m.faithful_wall_s and (role is None or m.role == role)
    ]


def _path_storage(
    models: list[RankModel], faithful: float, decomposed_storage_s: float
) -> tuple[float | None, str | None]:
    """How long storage was busy during SGLang's own load, and where that figure comes from.

    Two measurements, each able to miss part of it: the device's io_ticks during the faithful passes (SGLang's own
    I/O pattern, but blind to reads held back above the device - a cgroup throttle, a network file system) and the
    decomposed pass's storage time (alone, with its own I/O pattern). The larger is the better bound of how long
    storage held the load. (None, source) means: use the decomposed storage time.
    """
    if not models:
        return None, None
    if not all(m.faithful_disk_busy_s is not None for m in models):
        return None, "decomposed storage time"
    # Both figures are summed over every rank's model, so they compare like with like; the text gives the
    # device's busy time as a share of the faithful wall, which (unlike a sum of seconds over ranks) reads the
    # same at TP1 and TP8.
    busy = sum(m.faithful_disk_busy_s or 0.0 for m in models)
    disks = ", ".join(sorted({m.disk for m in models if m.disk}))
    if decomposed_storage_s > busy:
        busy_share = f"{busy / faithful:.0%}" if faithful > 0 else "n/a"
        return (
            None,
            f"decomposed storage time, more than the io_ticks of {disks} ({busy_share} of the faithful wall)",
        )
    return busy, f"io_ticks of {disks}"


def _decomposed_totals(models: list[RankModel]) -> PhaseTotals:
    total = PhaseTotals()
    for m in models:
        total = total + model_totals(m)
    return total


def path_attribution(session: Session, role: str | None = None) -> tuple[dict[str, float] | None, str | None]:
    """Shares of SGLang's own load (the faithful wall), with the overlap credited to storage, and where the storage
    figure comes from. (None, None) without --faithful.

    The decomposed pass times each phase alone; in SGLang's sequence the copy of resident pages overlaps the
    read-ahead of the next ones, so the phases add up to more than its wall. Storage was busy for as long as the
    block device had a request in flight during the faithful passes (its io_ticks), measured on SGLang's own
    sequence, or as long as the decomposed pass took to fetch the bytes where that is longer or there is no block
    device to sample (NFS, FUSE, tmpfs) - at most the faithful wall. The rest of the faithful wall is what the
    other phases added on top, split in proportion to their decomposed times. So a storage-bound load reads as such
    even though its copies, timed alone, are not free. The source is "io_ticks of vda" or the decomposed storage
    time (no device to sample, or it said more than the device).
    """
    models = _faithful_models(session, role)
    decomposed = _decomposed_totals(models)
    faithful = sum(m.faithful_wall_s or 0.0 for m in models)
    busy, source = _path_storage(models, faithful, decomposed.storage_read_s)
    if faithful <= 0 or decomposed.wall_s <= 0:
        return None, source
    # "other" is the decomposed pass's time outside its phases, not measured against the faithful wall.
    return overlap_shares(decomposed, faithful, other_s=decomposed.other_s, storage_s=busy), source


def sampled_attribution(session: Session) -> dict[str, float] | None:
    """Shares of SGLang's own load from its threads sampled in the kernel (``run --sample-threads``); None without.

    The slowest rank of the faithful pass is taken (the load waits for it), its models weighted by their faithful
    walls. The sampler sees storage, page cache, running and waiting. When the pass kept the spans of its copies
    (every model has ``faithful_sampled_copy_shares``), running and waiting inside a copy are h2d, running outside
    one is deserialisation, waiting outside one is other. Without them, the running share is split into deserialize,
    h2d and other in the proportions the decomposed replay timed them on that rank, and waiting counts as other.
    """
    best: tuple[float, list[RankModel]] | None = None
    for r in session.ranks:
        models = [m for m in r.models if m.faithful_sampled_shares and m.faithful_wall_s]
        wall = sum(m.faithful_wall_s or 0.0 for m in models)
        if models and (best is None or wall > best[0]):
            best = (wall, models)
    if best is None or best[0] <= 0:
        return None
    wall, models = best

    def weighted(
        shares_of: Callable[[RankModel], dict[str, float] | None], keys: tuple[str, ...]
    ) -> dict[str, float]:
        """The models' shares of ``keys``, each weighted by its faithful wall."""
        return {
            key: sum((shares_of(m) or {}).get(key, 0.0) * (m.faithful_wall_s or 0.0) for m in models) / wall
            for key in keys
        }

    sampled = weighted(lambda m: m.faithful_sampled_shares, ("storage", "page_cache", "cpu", "waiting"))
    if all(m.faithful_sampled_copy_shares for m in models):
        copying = weighted(lambda m: m.faithful_sampled_copy_shares, ("cpu", "waiting"))
        cpu_in_copies = min(copying["cpu"], sampled["cpu"])
        waiting_in_copies = min(copying["waiting"], sampled["waiting"])
        return {
            "storage": sampled["storage"],
            "page_cache": sampled["page_cache"],
            "deserialize": sampled["cpu"] - cpu_in_copies,
            "h2d": cpu_in_copies + waiting_in_copies,
            "other": sampled["waiting"] - waiting_in_copies,
        }
    decomposed = _decomposed_totals(models)
    running = decomposed.deserialize_s + decomposed.h2d_s + decomposed.other_s
    split = (
        {k: v / running for k, v in (("deserialize", decomposed.deserialize_s), ("h2d", decomposed.h2d_s))}
        if running > 0
        else {"deserialize": 0.0, "h2d": 0.0}
    )
    deserialize, h2d = sampled["cpu"] * split["deserialize"], sampled["cpu"] * split["h2d"]
    return {
        "storage": sampled["storage"],
        "page_cache": sampled["page_cache"],
        "deserialize": deserialize,
        "h2d": h2d,
        "other": sampled["cpu"] - deserialize - h2d + sampled["waiting"],
    }
