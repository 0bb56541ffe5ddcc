"""What the faithful pass measures besides its walls is taken outside them (issue 32 item 4): shards delivered to the
parent after the wall, residency read on descriptors opened before the load."""

from __future__ import annotations

import math
import os
import resource
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch

from ckptprof.checkpoint import fs
from ckptprof.loader import counters as counters_module
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.counters import ProcessCounters
from ckptprof.loader.plan import UnreadableShard, build_plan
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder, shard_dict
from ckptprof.loader.strategies import get_strategy
from ckptprof.loader.strategies.base import TORCH_DTYPES, LoadContext
from ckptprof.session import ShardTiming


def test_shards_left_for_after_the_wall_reach_the_parent_in_order_when_flushed() -> None:
    # GIVEN the faithful recorder, two models whose pending deliveries are left for after the wall
    seen: list[tuple[str, str]] = []

    def done(role: str, timing: ShardTiming) -> None:
        seen.append((role, timing.file))

    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), on_shard_done=done)
    rec.start()
    for role, files in (("target", ["t1", "t2"]), ("draft", ["d1"])):
        with rec.model(role, flush_at_end=False):
            for file in files:
                with rec.shard(file):
                    pass
    # WHEN the caller flushes once its wall is taken
    rec.flush_deliveries()
    # THEN every shard has reached the callback, in the order the shards closed, models in order
    assert seen == [("target", "t1"), ("target", "t2"), ("draft", "d1")]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open_shards(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder.resolve())):
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_faithful_sglang_pass_reads_residency_on_descriptors_opened_before_the_load(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the single-thread sglang path prepared for the faithful pass (outside the timed load)
    plan = build_plan(small_draft, tp=1, devices="cpu", cache="warm", strategy="sglang", faithful=True)
    (model,) = plan.models
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"), decompose=False)
    ctx.allocate(model)
    strategy = get_strategy("sglang")
    fds_before = _open_fds()
    strategy.prepare(ctx, plan)
    assert _open_fds() == fds_before + len(model.shards)

    # WHEN the load runs with a path-based residency check that would fail, and the kernel reports a third of each
    # shard resident on a descriptor
    def no_open(path: str | Path) -> int:
        raise OSError("opened a shard inside the timed load for its residency")

    monkeypatch.setattr(fs, "resident_bytes", no_open)
    monkeypatch.setattr(fs, "resident_bytes_fd", lambda fd, offset=0, length=None: os.fstat(fd).st_size // 3)
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer())
    rec.start()
    with rec.model(model.role):
        strategy.load_model(ctx, model, rec)
    strategy.close()

    # THEN each shard's missing bytes come from its own descriptor, every shard loaded, and close() let them go
    got = {s.file: s.nonresident_bytes for s in rec.models[0].shards}
    assert got == {shard.name: shard.bytes - shard.bytes // 3 for shard in model.shards}
    assert all(s.status == "ok" for s in rec.models[0].shards)
    assert _open_shards(small_draft) == []


def test_the_decomposed_sglang_pass_still_checks_each_shard_as_it_opens(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the decomposed pass (its wall is not the one compared with SGLang's): nothing kept open by prepare
    plan = build_plan(small_draft, tp=1, devices="cpu", cache="warm", strategy="sglang")
    (model,) = plan.models
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"), decompose=True)
    ctx.allocate(model)
    strategy = get_strategy("sglang")
    fds_before = _open_fds()
    strategy.prepare(ctx, plan)
    assert _open_fds() == fds_before
    checked: list[str] = []

    def by_path(path: str | Path) -> int:
        checked.append(Path(path).name)
        return 0

    monkeypatch.setattr(fs, "resident_bytes", by_path)
    rec = Recorder(copy_timer=HostCopyTimer())
    rec.start()
    with rec.model(model.role):
        strategy.load_model(ctx, model, rec)
    strategy.close()
    # THEN each shard's residency was read at its start, by path
    assert checked == [shard.name for shard in model.shards]


# -- what each shard costs on the timed path, counted (a regression puts a step back per shard and fails here) ------


class _CountingCounters(ProcessCounters):
    """The real counters, counting the reads of /proc/thread-self/io (a pread per call) and of getrusage, and the
    calls in which the thread's block count (getrusage's ru_inblock) had moved since the last."""

    def __init__(self) -> None:
        super().__init__()
        self.proc_reads = 0
        self.calls = 0
        self.block_moves = 0

    def thread_storage_read_bytes(self) -> int:
        self.proc_reads += 1
        return super().thread_storage_read_bytes()

    def thread_counts(self) -> tuple[int, int]:
        self.calls += 1
        before = self._thread_io.blocks
        counts = super().thread_counts()
        self.block_moves += self._thread_io.blocks != before
        return counts


def test_the_thread_counters_read_proc_only_when_the_threads_block_count_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the thread's counters, with getrusage's block count under the test's control
    blocks = [7]
    real = resource.getrusage

    def getrusage(who: int) -> Any:
        usage = real(who)
        return type("Usage", (), {"ru_majflt": usage.ru_majflt, "ru_inblock": blocks[0]})()

    monkeypatch.setattr(counters_module.resource, "getrusage", getrusage)
    counters = _CountingCounters()
    read_bytes = iter([4096, 8192])
    monkeypatch.setattr(
        ProcessCounters, "thread_storage_read_bytes", lambda self: next(read_bytes), raising=True
    )
    # WHEN they are read three times with no block read in between, then once after 8 blocks were read
    first = [counters.thread_counts()[1] for _ in range(3)]
    blocks[0] += 8
    after = counters.thread_counts()[1]
    # THEN /proc was read the first time and after the blocks moved only, and each answer is its last read's
    assert first == [4096, 4096, 4096]
    assert after == 8192
    assert counters.calls == 4


def _faithful_load(plan_dir: Path, strategy_name: str, rec: WallOnlyRecorder) -> tuple[Any, Any]:
    plan = build_plan(plan_dir, tp=2, devices="cpu", cache="warm", strategy=strategy_name, faithful=True)
    (model,) = plan.models
    ctx = LoadContext(rank=0, tp=2, device=torch.device("cpu"), decompose=False)
    ctx.allocate(model)
    strategy = get_strategy(strategy_name)
    fs.warm_cache([Path(s.path) for s in model.shards])
    strategy.prepare(ctx, plan)
    rec.start()
    try:
        with rec.model(model.role):
            strategy.load_model(ctx, model, rec)
    finally:
        strategy.close()
    return model, rec.models[0]


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"), reason="needs per-thread io accounting")
def test_a_warm_faithful_single_thread_pass_reads_proc_once_not_twice_a_shard(small_draft: Path) -> None:
    # GIVEN the faithful recorder on the real counters, counting their reads of /proc/thread-self/io
    counters = _CountingCounters()
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), counters=counters)
    # WHEN the single-thread sglang path loads a warm checkpoint (no block read from storage)
    model, loaded = _faithful_load(small_draft, "sglang", rec)
    # THEN each shard read its counters at open and close (getrusage), but /proc only for the thread's first read
    # and where its block count moved (before: twice a shard). A warm load moves it rarely, but not never: a page
    # reclaimed under the test (this VM's DAMON reclaim) is read back from storage.
    assert counters.calls == 2 * len(model.shards)
    assert counters.proc_reads == counters.block_moves
    assert 1 <= counters.proc_reads < len(model.shards)
    assert [s.file for s in loaded.shards] == [s.name for s in model.shards]
    assert all(
        s.status == "ok" and s.wall_s > 0 and s.work_s == s.wall_s and s.queued_s == 0 for s in loaded.shards
    )
    assert all(s.threads == [threading.current_thread().name] for s in loaded.shards)


class _PhaseCounting(WallOnlyRecorder):
    """The faithful recorder, counting its phase blocks and its calls on a shard's shared state (each a context
    manager or a call that takes the recorder's lock and looks the shard up)."""

    phases = 0
    shared_state_calls = 0

    def _phase(self, kind: str, nbytes: int, shard: ShardTiming | None, process: bool = False) -> Any:
        type(self).phases += 1
        return super()._phase(kind, nbytes, shard, process)

    def open_shard(self, file: str, nonresident_bytes: int = 0) -> ShardTiming:
        type(self).shared_state_calls += 1
        return super().open_shard(file, nonresident_bytes)

    def use_shard(self, shard: ShardTiming) -> Any:
        type(self).shared_state_calls += 1
        return super().use_shard(shard)

    def close_shard(self, shard: ShardTiming, error: BaseException | str | None = None) -> None:
        type(self).shared_state_calls += 1
        super().close_shard(shard, error)


def test_the_faithful_multithread_pass_has_no_phase_block_per_tensor_and_no_open_per_residency_check(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN sglang-mt's faithful pass, with the path-based residency check counted
    by_path: list[str] = []
    real = fs.resident_bytes

    def counted(path: str | Path) -> int:
        by_path.append(str(path))
        return real(path)

    monkeypatch.setattr(fs, "resident_bytes", counted)
    _PhaseCounting.phases = _PhaseCounting.shared_state_calls = 0
    rec = _PhaseCounting(copy_timer=HostCopyTimer())
    # WHEN it loads the checkpoint
    model, loaded = _faithful_load(small_draft, "sglang-mt", rec)
    # THEN no phase block (before: the pool's open, and before that 1 + 3 per tensor) and no call on a shard's
    # shared state while the threads work (before: an open, two use_shard blocks and a close a shard; on the H200
    # they cost the copying thread ~8 ms of a TP8 rank's 0.22 s): each shard is booked whole once. Residency is
    # asked on the descriptors opened before the load, and the counts the per-tensor blocks gave are all there
    assert (_PhaseCounting.phases, _PhaseCounting.shared_state_calls) == (0, 0)
    assert by_path == []
    tensors = sum(len(s.tensors or {}) for s in model.shards)
    assert sum(s.tensors for s in loaded.shards) == tensors
    data_bytes = sum(
        math.prod(shape) * torch.empty(0, dtype=TORCH_DTYPES[dtype]).element_size()
        for s in model.shards
        for dtype, shape in (s.tensors or {}).values()
    )
    assert sum(s.bytes for s in loaded.shards) == data_bytes
    assert all(s.h2d_bytes > 0 and s.status == "ok" for s in loaded.shards)
    assert len(loaded.copy_spans or []) == tensors


def test_a_shard_goes_to_the_parent_as_asdict_would_give_it() -> None:
    # GIVEN a closed shard with every kind of field set
    timing = ShardTiming(
        file="a.safetensors", bytes=3, wall_s=0.5, work_s=0.4, queued_s=0.1, threads=["t1", "t2"]
    )
    # WHEN it is turned into the rank's message
    out = shard_dict(timing)
    # THEN it is asdict's dict, fields in order, and its thread list is a copy (the recorder may still append)
    assert out == asdict(timing) and list(out) == list(asdict(timing))
    assert out["threads"] is not timing.threads


def test_the_faithful_close_gives_a_shard_the_general_closes_figures() -> None:
    # GIVEN the faithful and the decomposed recorders on one fake clock and fake counters
    class Fake:
        def __init__(self) -> None:
            self.now = 0.0
            self.faults = 0
            self.storage = 0

        def clock(self) -> float:
            self.now += 0.25
            return self.now

        def major_faults(self) -> int:
            return self.faults

        def storage_read_bytes(self) -> int:
            return self.storage

        def thread_counts(self) -> tuple[int, int]:
            self.faults += 2
            self.storage += 4096
            return self.faults, self.storage

    figures = []
    for cls in (WallOnlyRecorder, Recorder):
        fake = Fake()
        rec = cls(copy_timer=HostCopyTimer(), counters=fake, clock=fake.clock)
        rec.start()
        with rec.model("target"):
            with rec.shard("ok.safetensors", nonresident_bytes=5):
                pass
            with pytest.raises(UnreadableShard), rec.shard("bad.safetensors"):
                raise UnreadableShard("truncated")
        figures.append([asdict(s) for s in rec.models[0].shards])
    # THEN every figure of every shard is the same
    assert figures[0] == figures[1]
    assert figures[0][1]["status"] == "failed" and figures[0][1]["error"] == "truncated"


class _ThreadClock:
    """A clock the test sets, and each thread's counters as the test sets them (by thread name)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.counts: dict[str, tuple[int, int]] = {}

    def clock(self) -> float:
        return self.now

    def major_faults(self) -> int:
        return 0

    def storage_read_bytes(self) -> int:
        return 0

    def thread_counts(self) -> tuple[int, int]:
        return self.counts.get(threading.current_thread().name, (0, 0))


def _on_thread(name: str, work: Any) -> None:
    thread = threading.Thread(target=work, name=name)
    thread.start()
    thread.join()


@pytest.mark.parametrize("error", [None, "copy failed"])
def test_a_shard_booked_whole_has_the_figures_its_open_blocks_and_close_give(error: str | None) -> None:
    main = threading.current_thread().name
    # GIVEN a shard whose pool thread opened it from 2.0 to 2.5 s (2 faults, 8 KiB read) and whose rank thread copied
    # it from 4.0 to 5.0 s (4 faults, its storage counter read lower at the end: never a negative count), recorded
    # once with open_shard, a use_shard block per thread and close_shard
    fake = _ThreadClock()
    blocks = WallOnlyRecorder(copy_timer=HostCopyTimer(), counters=fake, clock=fake.clock)
    fake.now = 1.0
    blocks.start()
    with blocks.model("draft"):
        fake.now = 2.0
        timing = blocks.open_shard("a.safetensors", nonresident_bytes=7)

        def pool() -> None:
            fake.counts["pool-0"] = (1, 4096)
            with blocks.use_shard(timing):
                fake.now, fake.counts["pool-0"] = 2.5, (3, 12288)

        _on_thread("pool-0", pool)
        fake.now, fake.counts[main] = 4.0, (10, 8192)
        with blocks.use_shard(timing):
            fake.now, fake.counts[main] = 5.0, (14, 4096)
        blocks.add_counts(100, 50, 2, shard=timing)
        blocks.close_shard(timing, error)
    # WHEN the same work is booked whole from each thread's stretch
    fake = _ThreadClock()
    whole = WallOnlyRecorder(copy_timer=HostCopyTimer(), counters=fake, clock=fake.clock)
    fake.now = 1.0
    whole.start()
    with whole.model("draft"):
        stretches = [(2.0, 2.5, "pool-0", 2, 8192), (4.0, 5.0, main, 4, -4096)]
        whole.add_stretched_shard("a.safetensors", 7, stretches, (100, 50, 2), error)
    # THEN the shard's every figure is the same: wall from the first stretch to the last, work their union, the
    # rest queued, both threads in the order they took it up
    (by_blocks,) = blocks.models[0].shards
    (booked,) = whole.models[0].shards
    assert asdict(booked) == asdict(by_blocks)
    assert (booked.start_s, booked.wall_s, booked.work_s, booked.queued_s) == (1.0, 3.0, 1.5, 1.5)
    assert booked.threads == ["pool-0", main] and (booked.major_faults, booked.storage_bytes) == (6, 8192)
    assert booked.status == ("failed" if error else "ok")


def test_stretches_of_two_threads_at_once_count_once_as_work() -> None:
    # GIVEN a shard two threads worked on at once, 2.0-3.0 s and 2.5-3.5 s, then one more stretch at 4.0-4.5 s
    fake = _ThreadClock()
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), counters=fake, clock=fake.clock)
    rec.start()
    with rec.model("draft"):
        stretches = [(2.0, 3.0, "pool-0", 0, 0), (2.5, 3.5, "pool-1", 0, 0), (4.0, 4.5, "main", 0, 0)]
        # WHEN it is booked whole
        booked = rec.add_stretched_shard("a.safetensors", 0, stretches)
    # THEN its work is the union (1.5 + 0.5 s), not the sum (2.5 s), and the gap between is queued
    assert (booked.wall_s, booked.work_s, booked.queued_s) == (2.5, 2.0, 0.5)
