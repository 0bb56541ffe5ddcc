from __future__ import annotations

import os

import pytest

from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.counters import ProcessCounters
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeCounters:
    def __init__(self) -> None:
        self.faults = 0
        self.read = 0

    def major_faults(self) -> int:
        return self.faults

    def storage_read_bytes(self) -> int:
        return self.read


def make(cls: type[Recorder] = Recorder) -> tuple[Recorder, FakeClock, FakeCounters]:
    clock = FakeClock()
    counters = FakeCounters()
    rec = cls(copy_timer=HostCopyTimer(clock), counters=counters, clock=clock)
    rec.start()
    return rec, clock, counters


def test_phases_are_attributed_to_the_right_buckets() -> None:
    # GIVEN a shard whose tensor takes 0.1 s to open, 2 s to fault in and 0.5 s to copy
    rec, clock, counters = make()
    with rec.model("draft"), rec.shard("s1.safetensors", nonresident_bytes=4096):
        with rec.deserialize():
            clock.advance(0.1)
        with rec.read(1000):
            clock.advance(2.0)
            counters.faults += 7
            counters.read += 1_000_000
        with rec.h2d(250):
            clock.advance(0.5)
        rec.tensor_done()
        clock.advance(0.05)  # untimed bookkeeping
    # THEN each phase lands in its own bucket and the wall covers them all
    (shard,) = rec.models[0].shards
    assert shard.deserialize_s == pytest.approx(0.1)
    assert shard.read_s == pytest.approx(2.0)
    assert shard.h2d_s == pytest.approx(0.5)
    assert shard.wall_s == pytest.approx(2.65)
    assert (shard.bytes, shard.h2d_bytes, shard.tensors) == (1000, 250, 1)
    assert (shard.major_faults, shard.storage_bytes, shard.nonresident_bytes) == (7, 1_000_000, 4096)
    assert rec.models[0].wall_s == pytest.approx(2.65)
    assert shard.start_s == pytest.approx(0.0)


def test_each_shard_counts_only_what_its_thread_read_while_it_was_open() -> None:
    # GIVEN a thread whose counters already stand at 9 faults and 5 MB (torch's import, an earlier model), that
    # reads 1 MB with 2 faults in each of three shards, 4 kB between them, and takes part in shards it does not
    # own: one opened for several threads, where it records a phase, and one it joins with use_shard
    rec, _, counters = make()
    counters.faults, counters.read = 9, 5_000_000

    def read_one_mb() -> None:
        with rec.read(1000):
            counters.faults += 2
            counters.read += 1_000_000

    with rec.model("target"):
        for i in range(3):
            with rec.shard(f"s{i}.safetensors"):
                read_one_mb()
            counters.read += 4096  # between shards: no shard's
        spread = rec.open_shard("spread.safetensors")
        with rec.read(1000, shard=spread):
            counters.faults += 2
            counters.read += 1_000_000
        counters.read += 4096
        rec.close_shard(spread)
        joined = rec.open_shard("joined.safetensors")
        with rec.use_shard(joined):
            read_one_mb()
        counters.read += 4096
        rec.close_shard(joined)
    # THEN every shard holds exactly its own 2 faults and 1 MB: none counts from the thread's start (a shard
    # whose baseline is lost books 6 MB, 7 MB, ...) and none counts the bytes read between shards
    counted = {s.file: (s.major_faults, s.storage_bytes) for s in rec.models[0].shards}
    assert counted == {
        name: (2, 1_000_000)
        for name in (
            "s0.safetensors",
            "s1.safetensors",
            "s2.safetensors",
            "spread.safetensors",
            "joined.safetensors",
        )
    }


def test_failed_shard_is_marked_and_the_error_propagates() -> None:
    rec, clock, _ = make()
    with rec.model("target"):
        with pytest.raises(ValueError), rec.shard("bad.safetensors"):
            clock.advance(0.2)
            raise ValueError("corrupt")
        with rec.shard("good.safetensors"):
            clock.advance(0.1)
    bad, good = rec.models[0].shards
    assert bad.status == "failed" and bad.error == "ValueError: corrupt"
    assert good.status == "ok" and good.start_s == pytest.approx(0.2)


def test_phase_outside_shard_is_a_bug() -> None:
    rec, _, _ = make()
    with pytest.raises(RuntimeError), rec.read(1):
        pass


def test_wall_only_recorder_counts_bytes_but_times_only_walls() -> None:
    rec, clock, _ = make(WallOnlyRecorder)
    with rec.model("target"), rec.shard("s"):
        with rec.read(10):
            clock.advance(1.0)
        with rec.h2d(5):
            clock.advance(1.0)
    (shard,) = rec.models[0].shards
    assert shard.read_s == 0.0 and shard.h2d_s == 0.0
    assert shard.wall_s == pytest.approx(2.0)
    assert (shard.bytes, shard.h2d_bytes) == (10, 5)


def test_the_faithful_recorder_keeps_the_spans_of_its_copies() -> None:
    # GIVEN the faithful pass's recorder, a copy timed as an h2d phase and one bracketed by copy_began / copy_ended
    rec, clock, _ = make(WallOnlyRecorder)
    clock.advance(0.5)
    with rec.model("target") as model, rec.shard("s"):
        with rec.h2d(5):
            clock.advance(1.0)
        clock.advance(0.25)  # between copies: not a copy
        began = rec.copy_began()
        clock.advance(2.0)
        rec.copy_ended(began)
    # THEN the model holds both spans, as offsets from the rank's start like start_s
    assert model.copy_spans == [(0.5, 1.5), (1.75, 3.75)]
    # AND they are never saved: a session's JSON has no copy_spans
    from ckptprof.session import RankResult, Session

    saved = Session(ranks=[RankResult(rank=0, device="cpu", models=[model])]).to_dict()
    assert "copy_spans" not in saved["ranks"][0]["models"][0]


def test_the_decomposed_recorder_keeps_no_copy_spans() -> None:
    rec, clock, _ = make(Recorder)
    with rec.model("target") as model, rec.shard("s"):
        began = rec.copy_began()
        with rec.h2d(5):
            clock.advance(1.0)
        rec.copy_ended(began)
    assert model.copy_spans is None  # its copies are timed per shard by the copy timer instead


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"), reason="no per-thread io accounting here")
def test_process_counters_read_this_threads_io_file() -> None:
    # GIVEN the kernel's own line for this thread
    counters = ProcessCounters()
    with open("/proc/thread-self/io") as fh:
        line = next(ln for ln in fh if ln.startswith("read_bytes:"))
    # WHEN the counters read it their way (both counters in one call)
    faults, storage = counters.thread_counts()
    # THEN the per-thread file was parsed, not given up on for the process's counter, and the values agree
    assert not counters._thread_io.failed
    assert storage >= int(line.split(":", 1)[1]) and storage == counters.thread_storage_read_bytes()
    assert faults >= 0 and faults <= counters.thread_major_faults()


class MarkingCounters(FakeCounters):
    """Counters that can say whether the calling thread waited on storage (major faults, blocks read)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = 0

    def thread_io_marks(self) -> tuple[int, int]:
        return self.faults, self.blocks


def test_a_deserialize_block_that_waited_on_storage_is_booked_as_read() -> None:
    # GIVEN a safe_open whose first touch of the mapping pulls read-around in, then a get_tensor that does not
    clock = FakeClock()
    counters = MarkingCounters()
    rec = Recorder(copy_timer=HostCopyTimer(clock), counters=counters, clock=clock)
    rec.start()
    with rec.model("draft"), rec.shard("s1.safetensors"):
        with rec.deserialize():
            clock.advance(0.3)
            counters.blocks += 16384  # 8 MiB read from storage in this thread
        with rec.deserialize():
            clock.advance(0.01)
        with rec.deserialize():
            clock.advance(0.2)
            counters.faults += 1  # a major fault: the page came from storage
        with rec.read(1000):
            clock.advance(0.05)
    # THEN storage's 0.5 s is read time, the parse alone stays deserialisation, and no bytes are counted twice
    (shard,) = rec.models[0].shards
    assert shard.read_s == pytest.approx(0.55)
    assert shard.deserialize_s == pytest.approx(0.01)
    assert shard.bytes == 1000
    assert shard.major_faults == 1


def test_counters_that_cannot_tell_leave_deserialize_alone() -> None:
    rec, clock, counters = make()  # FakeCounters has no thread_io_marks
    with rec.model("draft"), rec.shard("s"), rec.deserialize():
        clock.advance(0.3)
        counters.faults += 1
    (shard,) = rec.models[0].shards
    assert shard.deserialize_s == pytest.approx(0.3) and shard.read_s == 0.0


def test_a_cold_page_touched_while_deserializing_lands_under_read(tmp_path: os.PathLike[str]) -> None:
    # GIVEN a file whose pages are not cached, mapped the way safetensors maps a shard
    import mmap
    from pathlib import Path

    from ckptprof.checkpoint import fs

    path = Path(tmp_path) / "blob"
    path.write_bytes(os.urandom(8 * 1024 * 1024))
    os.sync()
    if not fs.drop_cache([path]).ok or fs.resident_bytes(path) > 0:
        pytest.skip("the page cache could not be dropped here")
    rec = Recorder(copy_timer=HostCopyTimer())
    rec.start()
    with (
        open(path, "rb") as fh,
        mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
        rec.model("draft"),
        rec.shard("blob"),
    ):
        # WHEN the first touch of the mapping happens inside a deserialize block
        with rec.deserialize():
            first = mapped[4 * 1024 * 1024]
        # and a second one inside another, now resident
        with rec.deserialize():
            again = mapped[4 * 1024 * 1024]
    assert first == again
    # THEN the real kernel counters say the first waited on storage: its time is read time
    (shard,) = rec.models[0].shards
    assert shard.major_faults >= 1
    assert shard.read_s > 0
    assert shard.read_s > shard.deserialize_s
