"""The recorder's accounting, pinned where mutation testing found it unchecked (issue #36).

A fake clock and fake counters (which never start at zero, as a real process's do not) drive every path that
books seconds, bytes, faults and storage bytes on a shard.
"""

from __future__ import annotations

import threading

import pytest

from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import UnreadableShard
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.session import ShardTiming


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ProcessOnly:
    """Counters without per-thread figures: the process's stand in (faults, storage bytes)."""

    def __init__(self) -> None:
        self.faults = 50
        self.read = 70_000

    def major_faults(self) -> int:
        return self.faults

    def storage_read_bytes(self) -> int:
        return self.read


class PerThread(ProcessOnly):
    """Separate per-thread counters (as /proc/thread-self/io gives), each starting away from zero."""

    def __init__(self) -> None:
        super().__init__()
        self.t_faults = 5
        self.t_read = 9_000

    def thread_major_faults(self) -> int:
        return self.t_faults

    def thread_storage_read_bytes(self) -> int:
        return self.t_read


class BothAtOnce(ProcessOnly):
    """Both per-thread figures from one call (one read of /proc/thread-self/io), nothing else per thread."""

    def __init__(self) -> None:
        super().__init__()
        self.t_faults = 5
        self.t_read = 9_000

    def thread_counts(self) -> tuple[int, int]:
        return self.t_faults, self.t_read


def make(counters: ProcessOnly, cls: type[Recorder] = Recorder) -> tuple[Recorder, Clock]:
    clock = Clock()
    rec = cls(copy_timer=HostCopyTimer(clock), counters=counters, clock=clock)
    rec.start()
    return rec, clock


@pytest.mark.parametrize("kind", [ProcessOnly, PerThread, BothAtOnce])
def test_an_owned_shard_books_the_counters_moved_while_it_was_open(kind: type[ProcessOnly]) -> None:
    counters = kind()
    rec, clock = make(counters)
    with rec.model("target"), rec.shard("s"):
        clock.now += 1.0
        counters.faults += 3
        counters.read += 4096
        if isinstance(counters, (PerThread, BothAtOnce)):
            counters.t_faults += 2
            counters.t_read += 1024
    (s,) = rec.models[0].shards
    expected = (3, 4096) if kind is ProcessOnly else (0, 0)
    if isinstance(counters, (PerThread, BothAtOnce)):
        expected = (2, 1024)
    assert (s.major_faults, s.storage_bytes, s.wall_s) == (*expected, 1.0)


def test_a_storage_counter_that_went_backwards_books_nothing() -> None:
    counters = PerThread()
    rec, _clock = make(counters)
    with rec.model("target"), rec.shard("s"):
        counters.t_read -= 100  # a counter that restarted (a new thread id reused): not negative bytes
        counters.t_faults += 1
    (s,) = rec.models[0].shards
    assert (s.major_faults, s.storage_bytes) == (1, 0)


def test_phases_from_other_threads_count_their_own_counters_and_span_the_shard() -> None:
    counters = PerThread()
    rec, clock = make(counters)
    with rec.model("target"):
        clock.now += 0.5
        shard = rec.open_shard("s", nonresident_bytes=10)
        clock.now += 1.0  # nothing recorded yet: not part of the shard's span
        with rec.read(100, shard=shard):
            clock.now += 2.0
            counters.t_faults += 4
            counters.t_read += 800
        with rec.deserialize(shard=shard):
            clock.now += 0.25
        with rec.read(50, shard=shard, process=True):  # a library's own threads: the process's counters
            clock.now += 0.5
            counters.faults += 7
            counters.read += 3000
            counters.t_read += 1  # not this read's: the process count is
        rec.tensor_done(shard)
        rec.add_counts(5, 6, 2, shard=shard)
        clock.now += 3.0  # after the last event
        rec.close_shard(shard)
        rec.close_shard(shard)  # closing twice books nothing twice
    (s,) = rec.models[0].shards
    assert (s.read_s, s.deserialize_s, s.bytes, s.h2d_bytes, s.tensors) == (2.5, 0.25, 155, 6, 3)
    assert (s.major_faults, s.storage_bytes, s.nonresident_bytes) == (11, 3800, 10)
    # the shard lasted from its first phase's start to its last phase's end, offsets from the rank's start
    assert (s.start_s, s.wall_s) == (1.5, 2.75)
    assert rec.models[0].wall_s == 7.25


def test_a_phase_booked_after_a_later_one_does_not_shorten_the_shard() -> None:
    # Two threads: the phase that ended first can take the lock last. The fake clock plays that order.
    rec, clock = make(PerThread())
    with rec.model("target"):
        shard = rec.open_shard("s")
        with rec.read(1, shard=shard):  # 1000 .. 1004
            clock.now += 4.0
        clock.now -= 3.0
        with rec.read(1, shard=shard):  # 1001 .. 1002, booked second
            clock.now += 1.0
        rec.close_shard(shard)
    (s,) = rec.models[0].shards
    assert (s.start_s, s.wall_s, s.read_s) == (0.0, 4.0, 5.0)


def test_an_open_shard_with_no_phase_spans_open_to_close() -> None:
    rec, clock = make(PerThread())
    with rec.model("target"):
        shard = rec.open_shard("s")
        clock.now += 2.0
        rec.close_shard(shard, error="gave up")
    (s,) = rec.models[0].shards
    assert (s.wall_s, s.status, s.error) == (2.0, "failed", "gave up")


def test_use_shard_counts_a_stretch_of_one_threads_work_once() -> None:
    counters = PerThread()
    rec, clock = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")

        def work() -> None:
            with rec.use_shard(shard):
                with rec.read(10):  # no shard= needed inside the block; counted by the block, not the phase
                    clock.now += 1.0
                    counters.t_faults += 2
                    counters.t_read += 500
                with rec.use_shard(shard), rec.h2d(4):  # nested: not counted a second time
                    counters.t_read += 20
                counters.t_read -= 10_000  # the thread's counter moved back: no negative storage

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        rec.close_shard(shard)
    (s,) = rec.models[0].shards
    assert (s.bytes, s.h2d_bytes, s.read_s) == (10, 4, 1.0)
    assert (s.major_faults, s.storage_bytes) == (2, 0)


def test_use_shard_books_the_blocks_counters_on_leaving() -> None:
    counters = BothAtOnce()
    rec, _clock = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")
        with rec.use_shard(shard):
            counters.t_faults += 3
            counters.t_read += 700
        with rec.use_shard(shard):
            counters.t_read += 300
        rec.close_shard(shard)
    (s,) = rec.models[0].shards
    assert (s.major_faults, s.storage_bytes) == (3, 1000)


def test_read_awaited_books_the_wait_on_the_shard_named_at_its_end() -> None:
    counters = PerThread()
    rec, clock = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")
        with rec.read_awaited() as awaited:
            clock.now += 1.5
            counters.faults += 2
            counters.read += 640
            awaited.shard, awaited.nbytes = shard, 64
        with rec.read_awaited():  # no shard named: nothing booked
            clock.now += 9.0
            counters.read += 1
        rec.close_shard(shard)
    (s,) = rec.models[0].shards
    assert (s.read_s, s.bytes, s.major_faults, s.storage_bytes, s.wall_s) == (1.5, 64, 2, 640, 1.5)


def test_process_counts_outside_any_block_are_booked_on_the_open_shard() -> None:
    counters = PerThread()
    rec, _clock = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")
        since = rec.process_storage_bytes()
        assert (since, rec.process_major_faults()) == (70_000, 50)
        rec.add_process_counts(shard, storage_bytes=30, major_faults=3)
        counters.read += 1000
        done = ShardTiming(file="earlier", storage_bytes=400)
        # 1000 read since `since`; 400 booked on a closed shard and 30 on this one: 570 unaccounted
        rec.settle_storage(shard, since, [done, shard])
        rec.settle_storage(shard, since, [done, shard])  # settled: nothing more
        rec.close_shard(shard)
        rec.add_process_counts(shard, storage_bytes=1, major_faults=1)  # closed: ignored
        rec.settle_storage(shard, since - 10**6, [])  # closed: ignored
    (s,) = rec.models[0].shards
    assert (s.storage_bytes, s.major_faults) == (600, 3)


def test_a_failed_shard_keeps_its_error_and_the_callback_sees_it() -> None:
    seen: list[tuple[str, str, str | None]] = []
    rec, _clock = make(ProcessOnly())
    rec.on_shard_done = lambda role, t: seen.append((role, t.file, t.error))
    with rec.model("draft"):
        a = rec.open_shard("a")
        rec.close_shard(a, UnreadableShard("a", "is a FIFO"))
        b = rec.open_shard("b")
        rec.close_shard(b, KeyError("x"))
        with pytest.raises(OSError), rec.shard("c"):
            raise OSError("disk gone")
    assert seen == [
        ("draft", "a", str(UnreadableShard("a", "is a FIFO"))),
        ("draft", "b", "KeyError: 'x'"),
        ("draft", "c", "OSError: disk gone"),
    ]
    assert [t.status for t in rec.models[0].shards] == ["failed", "failed", "failed"]


def test_phases_need_an_open_shard_and_shards_a_model() -> None:
    rec, _ = make(ProcessOnly())
    with pytest.raises(RuntimeError, match=r"^a shard opened outside rec\.model\(\)$"):
        rec.open_shard("s")
    with rec.model("target"):
        shard = rec.open_shard("s")
        rec.close_shard(shard)
        with pytest.raises(RuntimeError, match=r"^phase recorded against shard 's', which is not open$"):
            rec.tensor_done(shard)
        with pytest.raises(RuntimeError, match=r"^phase recorded outside rec\.shard\(\)$"):
            rec.add_counts(1, 1, 1)


def test_offsets_count_from_the_first_clock_reading_without_start() -> None:
    clock = Clock()
    rec = Recorder(copy_timer=HostCopyTimer(clock), counters=ProcessOnly(), clock=clock)
    with rec.model("target") as model:
        clock.now += 2.0
        with rec.shard("s"):
            clock.now += 1.0
    assert (model.start_s, rec.models[0].shards[0].start_s, model.wall_s) == (0.0, 2.0, 3.0)
    clock2 = Clock()
    wall_only = WallOnlyRecorder(copy_timer=HostCopyTimer(clock2), counters=ProcessOnly(), clock=clock2)
    assert wall_only.copy_began() == 1000.0
    with wall_only.model("t"), wall_only.shard("s") as s:
        with wall_only.read_awaited() as awaited:
            awaited.shard, awaited.nbytes = s, 9
        with wall_only.deserialize():
            clock2.now += 1.0
    assert (s.bytes, s.deserialize_s, s.wall_s) == (9, 0.0, 1.0)


def test_every_count_adds_up_over_repeated_calls() -> None:
    counters = PerThread()
    rec, clock = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")
        assert shard.nonresident_bytes == 0
        for _ in range(2):
            with rec.h2d(3, shard=shard):  # from a thread that has no current shard: the one named
                clock.now += 0.5
            rec.tensor_done(shard)
            rec.add_counts(10, 1, 2, shard=shard)
            rec.add_process_counts(shard, storage_bytes=7, major_faults=1)
        rec.close_shard(shard)
    (s,) = rec.models[0].shards
    assert (s.h2d_bytes, s.tensors, s.bytes, s.storage_bytes, s.major_faults) == (8, 6, 20, 14, 2)
    assert s.h2d_s == 1.0  # the host copy timer's two spans, booked at close


def test_an_owned_shard_keeps_what_other_paths_booked_before_it_closed() -> None:
    counters = PerThread()
    rec, _ = make(counters)
    with rec.model("target"), rec.shard("s") as shard:
        rec.add_process_counts(shard, storage_bytes=30, major_faults=3)
        counters.t_faults += 1
        counters.t_read += 100
    (s,) = rec.models[0].shards
    assert (s.storage_bytes, s.major_faults) == (130, 4)


def test_one_unaccounted_byte_is_settled() -> None:
    counters = PerThread()
    rec, _ = make(counters)
    with rec.model("target"):
        shard = rec.open_shard("s")
        since = rec.process_storage_bytes()
        counters.read += 1
        rec.settle_storage(shard, since, [shard])
        rec.close_shard(shard)
    assert rec.models[0].shards[0].storage_bytes == 1
