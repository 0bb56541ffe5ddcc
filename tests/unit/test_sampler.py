"""The kernel sampler (profiling/sampler.py): each thread's state and faults read from /proc give an I/O-bound load
storage shares and a copy-bound load cpu shares, without touching the load."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ckptprof.checkpoint import diskstats
from ckptprof.profiling.sampler import (
    KernelSampler,
    ProcessSamples,
    ThreadState,
    Tick,
    Window,
    classify,
    merge_spans,
    process_class,
    read_thread,
)


def state(code: str, minflt: int = 0, majflt: int = 0, wchan: str = "") -> ThreadState:
    return ThreadState(tid=1, state=code, wchan=wchan, minflt=minflt, majflt=majflt)


def test_each_thread_state_has_its_class() -> None:
    assert classify(state("D", wchan="folio_wait_bit_common"), None) == "storage"
    assert classify(state("R", majflt=3), state("R", majflt=2)) == "storage"
    assert classify(state("R", minflt=90), state("R", minflt=10)) == "page_cache"
    assert classify(state("R", minflt=10), state("R", minflt=10)) == "cpu"
    assert classify(state("R", minflt=10), None) == "cpu"  # a thread's first tick has nothing to compare
    assert classify(state("S"), None) == "waiting" and classify(state("I"), None) == "waiting"


def test_a_process_is_in_its_most_telling_threads_class() -> None:
    assert process_class(["waiting", "cpu", "storage"]) == "storage"
    assert process_class(["cpu", "page_cache"]) == "page_cache"
    assert process_class(["waiting", "cpu"]) == "cpu"
    assert process_class([]) == "waiting"


def test_shares_cover_the_window_asked_for() -> None:
    ticks = [Tick(0.0, "cpu"), Tick(1.0, "storage"), Tick(2.0, "storage"), Tick(3.0, "waiting")]
    seen = ProcessSamples(pid=1, ticks=ticks)
    assert seen.shares() == {"storage": 0.5, "page_cache": 0.0, "cpu": 0.25, "waiting": 0.25}
    assert seen.shares(start=1.0, end=2.0)["storage"] == 1.0
    assert seen.shares(start=9.0) == {"storage": 0.0, "page_cache": 0.0, "cpu": 0.0, "waiting": 0.0}


def test_running_ticks_are_split_by_kernel_and_user_time() -> None:
    # GIVEN a copy out of a mapping: it faults at every tick, a quarter of its running time in the kernel
    ticks = [
        Tick(0.0, "page_cache", 100, 10),
        Tick(0.5, "page_cache", 130, 20),
        Tick(1.0, "storage", 160, 30),
    ]
    window = Window()
    window.add(ticks)
    shares = window.shares()
    # THEN its running ticks (two of three) are split 1:3 between page cache and cpu
    assert shares["storage"] == pytest.approx(1 / 3)
    assert shares["page_cache"] == pytest.approx(2 / 3 * 0.25) and shares["cpu"] == pytest.approx(
        2 / 3 * 0.75
    )
    # AND windows add up: another pass of the same load counts with the first
    window.add(ticks)
    assert window.shares() == pytest.approx(shares)
    # AND without counted time (one tick) the fault-based classes stand
    alone = Window()
    alone.add(ticks[:1])
    assert alone.shares()["page_cache"] == 1.0


def test_ticks_inside_the_copies_are_counted_apart() -> None:
    # GIVEN ten ticks 0.1 s apart: the thread waits on storage for three, then copies for four (running, three of its
    # four clock ticks of CPU time in user space), then deserialises for three (all user time)
    classes = ["storage"] * 3 + ["cpu"] * 4 + ["cpu"] * 3
    user = [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]
    system = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    ticks = [Tick(i / 10, c, u, k) for i, (c, u, k) in enumerate(zip(classes, user, system, strict=True))]
    window = Window()
    # WHEN the copy's span covers ticks 3-6 (two spans from two threads overlapping count once)
    window.add(ticks, copies=[(0.25, 0.5), (0.45, 0.65)])
    inside = window.copy_shares()
    # THEN four of the ten ticks fell inside it, split by the user and kernel time counted at those ticks (3:1)
    assert inside is not None
    assert sum(inside.values()) == pytest.approx(0.4)
    assert inside["cpu"] == pytest.approx(0.4 * 0.75) and inside["page_cache"] == pytest.approx(0.4 * 0.25)
    assert inside["storage"] == 0.0
    # AND the whole window's shares are the inside and the outside, each split by its own time
    shares = window.shares()
    assert shares["storage"] == pytest.approx(0.3)
    assert shares["cpu"] == pytest.approx(0.3 + 0.4 * 0.75) and shares["page_cache"] == pytest.approx(0.1)
    assert all(inside[c] <= shares[c] + 1e-9 for c in inside)
    # AND a window without copy spans has no copy shares, and its shares are those of the whole window as before
    plain = Window()
    plain.add(ticks)
    assert plain.copy_shares() is None
    assert plain.shares()["page_cache"] == pytest.approx(0.7 * 1 / 7)


def test_merged_spans_are_sorted_and_disjoint() -> None:
    assert merge_spans([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0), (2.0, 2.5)]) == [(0.0, 2.5), (3.0, 4.0)]
    assert merge_spans([]) == []


def write_task(root: Path, pid: int, tid: int, stat_state: str, minflt: int, majflt: int, wchan: str) -> None:
    task = root / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    # the command name may hold spaces and parentheses: the fields are read after its last ')'
    rest = [stat_state, "1", "1", "1", "0", "-1", "4194304", str(minflt), "0", str(majflt), "0", "5", "3"]
    (task / "stat").write_text(f"{tid} (python (x) y) " + " ".join(rest) + "\n")
    (task / "wchan").write_text(wchan)


def test_ticks_read_every_thread_from_proc(tmp_path: Path) -> None:
    write_task(tmp_path, 7, 7, "S", 100, 0, "do_epoll_wait")
    write_task(tmp_path, 7, 8, "R", 100, 0, "0")
    clock = iter([1.0, 2.0])
    sampler = KernelSampler([7, 99], proc_root=tmp_path, clock=lambda: next(clock))
    sampler.tick()
    write_task(tmp_path, 7, 8, "D", 100, 1, "folio_wait_bit_common")
    sampler.tick()
    seen = sampler.samples[7]
    assert [(t.at, t.cls) for t in seen.ticks] == [(1.0, "cpu"), (2.0, "storage")]
    assert seen.ticks[-1].user == 10 and seen.ticks[-1].system == 6  # both threads' 5 and 3 clock ticks
    assert seen.wchans == {"folio_wait_bit_common": 1}
    assert sampler.samples[99].ticks == []  # a process that is gone is skipped, not an error
    parsed = read_thread(tmp_path / "7", 8)
    assert parsed is not None and parsed.majflt == 1 and parsed.minflt == 100 and parsed.state == "D"
    assert read_thread(tmp_path / "7", 12345) is None


LOADS = {
    # Reads a file with its pages dropped before each pass: the thread waits on the device.
    "io": """
        import os, sys, time
        path = sys.argv[1]
        print("ready", flush=True)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while os.read(fd, 1 << 20):
                pass
            os.close(fd)
    """,
    # Copies between two buffers already in memory: the thread runs, and faults nothing.
    "copy": """
        import sys, time
        src = bytearray(64 << 20)
        dst = bytearray(64 << 20)
        dst[:] = src
        print("ready", flush=True)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            dst[:] = src
    """,
}


def sampled(kind: str, data: Path) -> ProcessSamples:
    """What the sampler saw of a child running LOADS[kind] on ``data``, from when it is ready until it exits."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(LOADS[kind]), str(data)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with KernelSampler([child.pid], hz=500) as sampler:
            child.wait(timeout=30)  # a hang guard: each load runs its loop for 1.5 s
        return sampler.samples[child.pid]
    finally:
        child.kill()
        child.wait()


def counted(seen: ProcessSamples) -> dict[str, int]:
    """What the kernel counted over the sampled ticks: ticks per class, major faults, bytes read from a device."""
    read = [t.read_bytes for t in seen.ticks if t.read_bytes is not None]
    out = {
        cls: sum(1 for t in seen.ticks if t.cls == cls) for cls in ("storage", "page_cache", "cpu", "waiting")
    }
    out["major_faults"] = seen.ticks[-1].majflt - seen.ticks[0].majflt
    out["device_bytes"] = read[-1] - read[0]
    return out


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sampler") / "data.bin"
    with path.open("wb") as fh:
        fh.write(os.urandom(64 << 20))
        fh.flush()
        os.fsync(fh.fileno())  # written back, so dropping its pages really sends the next read to the device
    return path


# How large a share of the wall each load spends in each class is a measure of time: benchmarks/
# bench_sampled_shares.py holds it, the two loads sampled side by side. Here: what the sampler counted.


def test_an_io_bound_load_is_seen_waiting_on_the_device(data_file: Path) -> None:
    # GIVEN a child that reads the file again and again, its pages dropped before each pass
    seen = sampled("io", data_file)
    got = counted(seen)
    if got["device_bytes"] == 0:
        pytest.skip(f"the file system under {data_file} kept the pages (tmpfs?): no device to wait on")
    # THEN the kernel counted at least one whole pass read from the device, and the sampler caught the reader
    # blocked on it (state D, in a wait channel it names) at some ticks, which it classed as storage
    assert got["device_bytes"] >= 64 << 20, got
    assert got["storage"] > 0 and sum(seen.wchans.values()) > 0, (got, seen.wchans)


def test_a_copy_bound_load_is_seen_running_and_fetching_nothing(data_file: Path) -> None:
    # GIVEN a child copying between two buffers it has already touched
    seen = sampled("copy", data_file)
    got = counted(seen)
    # THEN the kernel counted no major fault and no byte read from a device, and the sampler saw it running
    assert (got["major_faults"], got["device_bytes"]) == (0, 0), got
    assert got["cpu"] > 0, got


def test_waits_of_a_load_that_fetched_nothing_are_the_page_caches() -> None:
    # GIVEN ranks faulting the same cached pages: a third of the ticks in D, yet no major fault and no block read
    warm = [
        Tick(0.0, "storage", 0, 0, 5, 1000),
        Tick(0.5, "cpu", 40, 10, 5, 1000),
        Tick(1.0, "cpu", 80, 20, 5, 1000),
    ]
    window = Window()
    window.add(warm)
    shares = window.shares()
    # THEN those waits were on pages in memory: page cache, not storage
    assert shares["storage"] == 0.0 and shares["page_cache"] == pytest.approx(1 / 3 + 2 / 3 * 0.2)
    # AND a load that did fetch (a major fault, or bytes read from the device) keeps its storage share
    for fetched in (
        [Tick(0.0, "storage", 0, 0, 5, 1000), Tick(1.0, "cpu", 80, 20, 6, 1000)],
        [Tick(0.0, "storage", 0, 0, 5, 1000), Tick(1.0, "cpu", 80, 20, 5, 9000)],
    ):
        cold = Window()
        cold.add(fetched)
        assert cold.shares()["storage"] == 0.5
    # AND so does one whose I/O counters could not be read
    blind = Window()
    blind.add([Tick(0.0, "storage", 0, 0, 5, None), Tick(1.0, "cpu", 80, 20, 5, None)])
    assert blind.shares()["storage"] == 0.5


def write_diskstats(root: Path, in_flight: int, io_ticks: int) -> None:
    # major minor name reads merged sectors ms writes merged sectors ms in_flight io_ticks time_in_queue
    (root / "diskstats").write_text(
        f"   7       0 loop0 1 0 2 0 0 0 0 0 0 0 0\n 253       0 vda 900 0 7200 50 0 0 0 0 {in_flight} {io_ticks} 60\n"
    )


def test_a_wait_while_the_disk_is_idle_is_on_the_page_cache(tmp_path: Path) -> None:
    """GIVEN a thread in state D at every tick (ranks faulting the same cached page wait there too) WHEN the disk
    under the checkpoint had no request in flight and its io_ticks did not move since the last tick THEN that tick is
    page cache; while the disk is busy (a request in flight, or io_ticks moved) it stays storage."""
    write_task(tmp_path, 7, 7, "D", 100, 0, "folio_wait_bit_common")
    write_diskstats(tmp_path, in_flight=0, io_ticks=500)
    clock = iter(float(i) for i in range(10))
    sampler = KernelSampler([7], proc_root=tmp_path, clock=lambda: next(clock), disks=["vda", "vda"])
    sampler.tick()  # nothing to compare with yet: storage, as without the disk
    sampler.tick()  # idle: nothing in flight, io_ticks still 500
    write_diskstats(tmp_path, in_flight=2, io_ticks=500)
    sampler.tick()  # requests in flight now
    write_diskstats(tmp_path, in_flight=0, io_ticks=503)
    sampler.tick()  # none now, but the device was busy since the last tick
    sampler.tick()  # idle again
    assert [t.cls for t in sampler.samples[7].ticks] == [
        "storage",
        "page_cache",
        "storage",
        "storage",
        "page_cache",
    ]
    assert (sampler.disk_ticks, sampler.disk_idle_ticks) == (5, 2)
    # AND without a disk to ask (NFS, FUSE) or with one that cannot be read, a wait stays storage
    for disks in ([], ["nvme9n1"]):
        blind = KernelSampler([7], proc_root=tmp_path, clock=lambda: 0.0, disks=disks)
        blind.tick()
        blind.tick()
        assert [t.cls for t in blind.samples[7].ticks] == ["storage", "storage"]


def test_diskstats_gives_the_requests_in_flight(tmp_path: Path) -> None:
    write_diskstats(tmp_path, in_flight=3, io_ticks=42)
    sample = diskstats.sample("vda", (tmp_path / "diskstats").read_text())
    assert sample is not None and (sample.in_flight, sample.io_ticks_ms, sample.read_bytes) == (
        3,
        42,
        7200 * 512,
    )
