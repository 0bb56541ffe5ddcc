from __future__ import annotations

import os
from pathlib import Path

import pytest

from ckptprof.checkpoint import diskstats, fs

# Two lines of a real /proc/diskstats (kernel 6.x: 20 fields), vda read 1000 sectors and was busy 250 ms.
TEXT = """ 253       0 vda 120 3 1000 80 40 2 64 30 0 250 110 0 0 0 0 5 1
 253       1 vda1 100 3 800 70 40 2 64 30 0 200 100 0 0 0 0 0 0
"""


def test_sample_reads_io_ticks_and_sectors_of_the_named_device() -> None:
    assert diskstats.sample("vda", TEXT) == diskstats.DiskSample(io_ticks_ms=250, read_bytes=1000 * 512)
    assert diskstats.sample("vda1", TEXT) == diskstats.DiskSample(io_ticks_ms=200, read_bytes=800 * 512)
    assert diskstats.sample("sdb", TEXT) is None
    assert diskstats.sample("vda", " 253 0 vda 1 2 3\n") is None  # too short a line: not guessed at


def test_deltas_never_go_negative() -> None:
    a = diskstats.DiskSample(io_ticks_ms=1000, read_bytes=4096)
    b = diskstats.DiskSample(io_ticks_ms=1750, read_bytes=8192)
    assert b.busy_since(a) == 0.75 and b.read_since(a) == 4096
    assert a.busy_since(b) == 0.0 and a.read_since(b) == 0  # a counter reset (device re-attached)


def test_no_block_device_under_proc_or_a_missing_path(tmp_path: Path) -> None:
    assert diskstats.device_for("/proc/self/status") is None  # procfs: an anonymous device
    assert diskstats.device_for(tmp_path / "missing") is None


def test_a_cold_read_shows_on_the_device_under_the_file(tmp_path: Path) -> None:
    disk = diskstats.device_for(tmp_path)
    if disk is None:
        pytest.skip("no block device under the temporary directory (tmpfs or overlay)")
    path = tmp_path / "blob"
    path.write_bytes(os.urandom(32 * 1024 * 1024))
    os.sync()
    if not fs.drop_cache([path]).ok:
        pytest.skip("the page cache could not be dropped here")
    before = diskstats.sample(disk)
    assert before is not None
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    after = diskstats.sample(disk)
    assert after is not None
    # The device read at least most of the file (other processes may add to it, never subtract).
    assert after.read_since(before) >= 16 * 1024 * 1024
    assert after.busy_since(before) > 0
