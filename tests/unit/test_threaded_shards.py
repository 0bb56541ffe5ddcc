"""Shards worked on by several threads (SGLang's multithread loader, reader pools): each shard's queued time is kept
apart from its work, the slowest shards are ranked by work, and a rank's columns add up to its wall (#32 item 1);
rates are bytes over the wall-clock union of the intervals in which they moved (#32 item 3)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from ckptprof.analysis.attribution import model_totals, slowest_shards
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.recorder import Recorder
from ckptprof.render.rows import RANK_HEADERS, SLOWEST_HEADERS, rank_rows, slowest_rows
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankResult, Session, ShardTiming
from ckptprof.session_config import RunConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def on_thread(name: str, work: Callable[[], None]) -> None:
    """Run ``work`` on a thread of that name and wait for it: threads one after another, so the fake clock (set
    inside ``work``) decides when each interval happened, overlapping or not."""
    t = threading.Thread(target=work, name=name)
    t.start()
    t.join()


def multithread_load() -> tuple[Recorder, dict[str, ShardTiming]]:
    """GIVEN SGLang's multithread path on four threads: three pool threads open shards a, b, c at once (t 0-1);
    the rank's thread then reads and copies a (1-4, 4-5), b (5-6) and c (6-7), and does 2 s of bookkeeping."""
    clock = FakeClock()
    rec = Recorder(copy_timer=HostCopyTimer(clock), clock=clock)
    rec.start()
    shards: dict[str, ShardTiming] = {}
    with rec.model("target") as rm:
        for name in "abc":

            def open_one(name: str = name) -> None:
                clock.now = 0.0
                shard = rec.open_shard(f"{name}.safetensors")
                shards[name] = shard
                with rec.use_shard(shard), rec.deserialize():
                    clock.now = 1.0

            on_thread(f"pool-{name}", open_one)

        def consume(shard: ShardTiming, read: float, copy: float, nbytes: int) -> None:
            with rec.use_shard(shard):
                with rec.read(nbytes):
                    clock.now += read
                with rec.h2d(nbytes):
                    clock.now += copy
                rec.tensor_done()
            rec.close_shard(shard)

        def rank_loop() -> None:
            clock.now = 1.0
            consume(shards["a"], 3.0, 1.0, 4_000_000_000)
            consume(shards["b"], 0.5, 0.5, 7_000)
            consume(shards["c"], 0.5, 0.5, 7_000)
            clock.now = 9.0

        on_thread("rank", rank_loop)
    assert rm.wall_s == pytest.approx(9.0)
    return rec, shards


def test_a_shards_queued_time_is_apart_from_its_work_and_names_its_threads() -> None:
    _, shards = multithread_load()
    a, b, c = shards["a"], shards["b"], shards["c"]
    # THEN each shard's wall runs from its open to its last copy, and the time it waited for the rank's thread is
    # queued, not work
    assert (a.wall_s, b.wall_s, c.wall_s) == pytest.approx((5.0, 6.0, 7.0))
    assert (a.work_s, b.work_s, c.work_s) == pytest.approx((5.0, 2.0, 2.0))
    assert (a.queued_s, b.queued_s, c.queued_s) == pytest.approx((0.0, 4.0, 5.0))
    assert a.threads == ["pool-a", "rank"]
    assert c.threads == ["pool-c", "rank"]


def test_the_slowest_shards_are_ranked_by_work_not_by_queued_wall() -> None:
    rec, _ = multithread_load()
    session = Session(ranks=[RankResult(rank=0, device="cpu", models=rec.models)])
    # THEN the big shard the rank spent 4 s on comes first, not the 7 kB one that waited longest
    assert [s.file for _, _, s in slowest_shards(session, 3)] == [
        "a.safetensors",
        "b.safetensors",
        "c.safetensors",
    ]
    row = dict(zip(SLOWEST_HEADERS, slowest_rows(session, 1)[0], strict=True))
    assert (row["work s"], row["queued s"], row["wall s"]) == ("5.000", "0.000", "5.000")


def test_a_ranks_columns_add_up_to_its_wall_when_threads_overlap() -> None:
    rec, _ = multithread_load()
    (rm,) = rec.models
    # THEN the model's wall (9 s) splits into reads 4 s (a, b, c), copies 2 s, the three pool opens 1 s (at once:
    # wall-clock, not 3 thread-seconds) and 2 s outside every phase (bookkeeping)
    assert rm.busy_s == pytest.approx({"read": 4.0, "deserialize": 1.0, "h2d": 2.0, "any": 7.0})
    assert rm.wall_parts_s == pytest.approx({"read": 4.0, "deserialize": 1.0, "h2d": 2.0, "other": 2.0})
    session = Session(ranks=[RankResult(rank=0, device="cpu", models=rec.models)])
    row = dict(zip(RANK_HEADERS, rank_rows(session)[0], strict=True))
    percents = [float(row[k].rstrip("%")) for k in ("read", "deser", "h2d", "other")]
    assert sum(percents) == pytest.approx(100, abs=2)
    assert row["other"] == "22%"
    totals = model_totals(rm)
    assert totals.read_s + totals.deserialize_s + totals.h2d_s + totals.other_s == pytest.approx(9.0)


def test_overlapping_phases_share_the_wall_instead_of_overflowing_it() -> None:
    # GIVEN a pool thread deserialising (0-2) while the rank's thread copies (1-3): 1 s of both at once
    clock = FakeClock()
    rec = Recorder(copy_timer=HostCopyTimer(clock), clock=clock)
    rec.start()
    with rec.model("target"):
        shard = rec.open_shard("s.safetensors")

        def pool() -> None:
            clock.now = 0.0
            with rec.deserialize(shard=shard):
                clock.now = 2.0

        def rank() -> None:
            clock.now = 1.0
            with rec.h2d(10, shard=shard):
                clock.now = 3.0
            rec.close_shard(shard)

        on_thread("pool", pool)
        on_thread("rank", rank)
    (rm,) = rec.models
    # THEN the overlapping second goes half to each, and the parts add up to the 3 s wall
    assert rm.wall_parts_s == pytest.approx({"read": 0.0, "deserialize": 1.5, "h2d": 1.5, "other": 0.0})
    assert sum((rm.wall_parts_s or {}).values()) == pytest.approx(rm.wall_s)


def reader_pool_load() -> Recorder:
    """GIVEN a pipelined load: 16 reader threads each read 0.1 GB at once for the same 1 s, 1.6 GB in all, then one
    copy of it all (1-1.2 s)."""
    clock = FakeClock()
    rec = Recorder(copy_timer=HostCopyTimer(clock), clock=clock)
    rec.start()
    with rec.model("target"):
        shard = rec.open_shard("s.safetensors", nonresident_bytes=1_600_000_000)
        for i in range(16):

            def read(i: int = i) -> None:
                clock.now = 0.0
                with rec.read(100_000_000, shard=shard):
                    clock.now = 1.0

            on_thread(f"reader-{i}", read)

        def copy() -> None:
            with rec.h2d(1_600_000_000, shard=shard):
                clock.now = 1.2
            rec.close_shard(shard)

        on_thread("reader-0", copy)
    return rec


def test_rates_are_bytes_over_the_wall_clock_they_moved_in_not_summed_thread_time() -> None:
    rec = reader_pool_load()
    (rm,) = rec.models
    assert rm.shards[0].read_s == pytest.approx(16.0)  # thread-seconds, kept per shard
    session = Session(
        ranks=[RankResult(rank=0, device="cpu", models=rec.models)],
        ceilings=Ceilings(storage_read_GBps=2.0, storage_read_1_stream_GBps=2.0),
    )
    session.models = [ModelInfo(role="target", path="/x", fs_type="ext4", total_bytes=1_600_000_000)]
    session.config = RunConfig.from_dict({"strategy": "pipelined"})
    verdict = compute_verdict(session)
    # THEN the read rate is 1.6 GB over the 1 s the reads took, 80% of the ceiling - not 1.6 GB / 16 thread-s
    assert verdict.read_GBps == pytest.approx(1.6)
    assert verdict.h2d_GBps == pytest.approx(8.0)
    assert "1.60 GB/s vs 2.00 GB/s" in verdict.summary
    assert "(80%)" in verdict.summary
