"""The faithful passes: SGLang's (or vLLM's) exact sequence, timed by its shard walls only, ``rounds`` times, with
decomposed passes (walls only) between them, and each pass's figures gathered per (rank, model) until they are
written into the session's models as medians."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptprof.checkpoint import diskstats
from ckptprof.loader import torchrun
from ckptprof.loader.plan import ReplayPlan
from ckptprof.profiling.sampler import KernelSampler, Window, merge_spans, storage_as_page_cache
from ckptprof.run.cache_prep import prepare_all
from ckptprof.run.passes import run_ranks
from ckptprof.session import RankModel, RankResult, Session

Printer = Callable[[str], None]
Key = tuple[int, str]
"""(rank, model role)."""

# A faithful pass that fetched at most this fraction of what it loaded from its block device fetched nothing to speak
# of (a header page evicted): its threads' D states are waits on cached pages.
FETCHED_NOTHING = 0.01


def engine_title(config: Mapping[str, Any]) -> str:
    """The engine whose loading a session replays, as a person names it."""
    vllm = config.get("vllm_release") is not None or str(config.get("strategy", "")).startswith("vllm")
    return "vLLM" if vllm else "SGLang"


@dataclass
class FaithfulTally:
    """Every faithful pass's figures per (rank, model), and the decomposed walls between them."""

    faithful_walls: dict[Key, list[float]] = field(default_factory=dict)
    decomposed_walls: dict[Key, list[float]] = field(default_factory=dict)
    fetched: dict[Key, int] = field(default_factory=dict)
    """Bytes the first faithful pass read from storage, by its shards' own count."""
    busy_fractions: dict[Key, list[float]] = field(default_factory=dict)
    sampled: dict[Key, Window] = field(default_factory=dict)
    copy_seconds: dict[Key, list[float]] = field(default_factory=dict)
    disk_reads: dict[Key, int] = field(default_factory=dict)
    engine: dict[int, RankResult] = field(default_factory=dict)
    """Each rank's first faithful result: the engine's import and output."""

    @classmethod
    def after_decomposed(cls, session: Session) -> FaithfulTally:
        """A tally that starts from the decomposed pass the session already holds."""
        return cls(decomposed_walls={(r.rank, m.role): [m.wall_s] for r in session.ranks for m in r.models})

    def add_faithful(self, results: list[RankResult], sampler: KernelSampler | None) -> None:
        for r in results:
            if sampler is not None:
                keep_samples(self.sampled, sampler, r)
            self.engine.setdefault(r.rank, r)
            for m in r.models:
                key = (r.rank, m.role)
                self.faithful_walls.setdefault(key, []).append(m.wall_s)
                if m.copy_spans is not None:
                    spans = merge_spans(m.copy_spans)
                    self.copy_seconds.setdefault(key, []).append(sum(end - start for start, end in spans))
                self.fetched.setdefault(key, sum(s.storage_bytes for s in m.shards))
                if m.disk_read_bytes is not None:
                    self.disk_reads.setdefault(key, m.disk_read_bytes)
                if m.disk_busy_s is not None and m.wall_s > 0:
                    self.busy_fractions.setdefault(key, []).append(min(1.0, m.disk_busy_s / m.wall_s))

    def add_decomposed(self, results: list[RankResult]) -> None:
        for r in results:
            for m in r.models:
                self.decomposed_walls.setdefault((r.rank, m.role), []).append(m.wall_s)

    def write_into(self, session: Session, rounds: int) -> None:
        """Each model's faithful figures: the medians of the passes (lists too when there were several)."""
        for r in session.ranks:
            first = self.engine.get(r.rank)
            if first is not None:
                r.engine_import_s, r.engine_output = first.engine_import_s, first.engine_output
                r.faithful_read_bytes_before_load = first.read_bytes_before_load
            for m in r.models:
                self._write_model(m, (r.rank, m.role), rounds)

    def _write_model(self, m: RankModel, key: Key, rounds: int) -> None:
        m.faithful_disk_read_bytes = self.disk_reads.get(key)
        walls = self.faithful_walls.get(key)
        if not walls:
            return
        m.faithful_wall_s = statistics.median(walls)
        m.faithful_storage_bytes = self.fetched.get(key)
        fractions = self.busy_fractions.get(key)
        if fractions and len(fractions) == len(walls):  # every pass sampled the device, or none counts
            m.faithful_disk_busy_s = statistics.median(fractions) * m.faithful_wall_s
        if rounds > 1:
            m.faithful_walls = walls
            m.decomposed_walls = self.decomposed_walls.get(key)
        copies = self.copy_seconds.get(key)
        if copies and len(copies) == len(walls):
            m.faithful_copy_s = statistics.median(copies)
        window = self.sampled.get(key)
        if window is not None and window.counts:
            loaded = sum(sh.bytes for sh in m.shards)
            # The kernel counted (next to) no byte read from the block device in SGLang's pass: its D states
            # were waits on pages already in memory (ranks faulting the same page), not on storage.
            nothing = bool(m.disk) and (m.faithful_storage_bytes or 0) <= FETCHED_NOTHING * loaded
            m.faithful_sampled_shares = rounded_shares(window.shares(), nothing)
            in_copies = window.copy_shares()
            if in_copies is not None:
                m.faithful_sampled_copy_shares = rounded_shares(in_copies, nothing)


def faithful_passes(
    session: Session,
    plan: ReplayPlan,
    rounds: int,
    progress: bool,
    group: torchrun.TorchrunGroup | None,
    say: Printer,
    sample: bool = False,
) -> None:
    """SGLang's exact sequence, ``rounds`` times, with a decomposed pass (walls only) between two of them. With
    ``sample``, every rank's threads are sampled from the kernel while it runs SGLang's sequence unchanged."""
    tally = FaithfulTally.after_decomposed(session)
    title = engine_title(session.config)
    # The block devices under the checkpoints, asked at each tick whether storage was busy at all.
    disks = [disk for disk in (diskstats.device_for(model.path) for model in plan.models) if disk]
    for i in range(rounds):
        prepare_all(plan, group)
        say(
            f"faithful pass{f' {i + 1}/{rounds}' if rounds > 1 else ''}: {title}'s exact sequence, no decomposition ..."
        )
        sampler = KernelSampler([], disks=disks) if sample else None
        if sampler is not None:
            sampler.start()
        try:
            results = run_ranks(
                plan,
                faithful=True,
                progress=progress,
                group=group,
                on_start=sampler.watch_rank if sampler is not None else None,
            )
        finally:
            if sampler is not None:
                sampler.stop()
        tally.add_faithful(results or [], sampler)
        if i < rounds - 1:
            prepare_all(plan, group)
            say(f"decomposed pass {i + 2}/{rounds} (walls only) ...")
            tally.add_decomposed(run_ranks(plan, faithful=False, progress=progress, group=group) or [])
    tally.write_into(session, rounds)


def rounded_shares(shares: dict[str, float], fetched_nothing: bool) -> dict[str, float]:
    """Shares as saved: rounded, with storage counted as page cache when the pass fetched nothing from the device."""
    if fetched_nothing:
        shares = storage_as_page_cache(shares)
    return {k: round(v, 4) for k, v in shares.items()}


def keep_samples(sampled: dict[Key, Window], sampler: KernelSampler, rank: RankResult) -> None:
    """Each model's ticks: the rank's samples cut to the model's load (the host's monotonic clock is shared)."""
    seen = sampler.samples.get(rank.pid)
    if seen is None or rank.started_monotonic is None:
        return
    for m in rank.models:
        begin = rank.started_monotonic + m.start_s
        copies = (
            None
            if m.copy_spans is None
            else [
                (rank.started_monotonic + start, rank.started_monotonic + end) for start, end in m.copy_spans
            ]
        )
        sampled.setdefault((rank.rank, m.role), Window()).add(seen.between(begin, begin + m.wall_s), copies)
