"""The registry of ckptprof runs in progress: the lock, not the pid, says whether a run is going on."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptprof import inprogress
from ckptprof.checkpoint import fs

HOLDER = """
import sys, time
from pathlib import Path
from ckptprof import inprogress
with inprogress.registered("run", ["/data/ckpt"], "cold", base=Path(sys.argv[1])):
    print("registered", flush=True)
    time.sleep(60)
"""


def test_a_live_run_is_listed_and_a_killed_one_is_not(tmp_path: Path) -> None:
    # GIVEN another process registered as a cold run
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "registered"
        started = time.time()
        (entry,) = inprogress.others(base=tmp_path)
        assert entry.live and entry.pid == holder.pid and entry.cache == "cold"
        assert entry.files == ("/data/ckpt",)
        # WHEN it is killed (no chance to say it ended)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    finally:
        holder.kill()
        holder.wait()
    # THEN it is not in progress any more, but still counts for a probe that began while it ran
    assert inprogress.others(base=tmp_path) == []
    (ended,) = inprogress.others(since=started - 60, base=tmp_path)
    assert not ended.live


def test_this_process_is_never_its_own_other_run(tmp_path: Path) -> None:
    with inprogress.registered("run", base=tmp_path), inprogress.registered("probe", base=tmp_path):
        assert len(list((tmp_path / "runs").glob("*.json"))) == 1  # nested: one entry
        assert inprogress.others(base=tmp_path) == []


def test_an_unwritable_cache_only_costs_the_listing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with inprogress.registered("run", base=blocker):
        assert inprogress.others(base=blocker) == []


MOUNTINFO = (
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
    "45 27 0:52 / /var/tmp/my\\040mount rw,nosuid,nodev,relatime - fuse.sshfs me@10.0.0.2:/srv/ckpt "
    "rw,user_id=0,group_id=0\n"
)


def test_the_mount_of_a_path_comes_from_mountinfo() -> None:
    mount = fs.mount_identity("/var/tmp/my mount/ckpt/model.safetensors", mountinfo=MOUNTINFO)
    # (statx names this machine's own mounts, absent from the text given: the longest mount point then decides)
    assert mount is not None
    assert (mount.mount_id, mount.fs_type, mount.source) == (45, "fuse.sshfs", "me@10.0.0.2:/srv/ckpt")
    assert mount.mount_point == "/var/tmp/my mount" and mount.device == "0:52"
    assert "user_id=0" in mount.options
    assert fs.mount_identity("/etc/hosts", mountinfo=MOUNTINFO) is not None


def test_this_machines_root_has_a_mount_identity() -> None:
    mount = fs.mount_identity("/")
    assert mount is not None and mount.mount_point == "/"


def test_a_device_that_read_for_others_during_the_probe_makes_it_contended() -> None:
    from ckptprof.checkpoint.diskstats import DiskSample
    from ckptprof.probe import contention

    before = DiskSample(io_ticks_ms=0, read_bytes=0)
    own = 400_000_000
    # the probe's own reads, plus readahead's slack: alone
    assert contention.device_busy_note("vda", before, DiskSample(900, own + 50_000_000), own) is None
    # another 300 MB read by someone else meanwhile: contended, and never kept
    note = contention.device_busy_note("vda", before, DiskSample(900, own + 300_000_000), own)
    assert note is not None and contention.is_contended([note]) and "vda" in note


def test_a_cold_run_waits_for_a_warm_run_on_its_files_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckptprof.run import cache_state

    # GIVEN a warm run on /data/ckpt that ends on its own after a moment, and one on other files that does not
    monkeypatch.setenv("CKPTPROF_CACHE", str(tmp_path))
    short = subprocess.Popen(
        [sys.executable, "-c", HOLDER.replace('"cold"', '"warm"').replace("60", "1.5"), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    elsewhere = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER.replace('"cold"', '"warm"').replace("/data/ckpt", "/data/other"),
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    try:
        for holder in (short, elsewhere):
            assert holder.stdout is not None and holder.stdout.readline().strip() == "registered"
        # WHEN a cold run on /data/ckpt (a folder of it, here) is about to drop the page cache
        note = cache_state.before_dropping(["/data/ckpt/model.safetensors"], said.append, wait_s=60)
    finally:
        for holder in (short, elsewhere):
            holder.kill()
            holder.wait()
    # THEN it said it waited for that run alone, and dropped once it had ended: nothing left to warn about
    assert note is None
    assert len(said) == 1 and f"pid {short.pid}" in said[0] and str(elsewhere.pid) not in said[0], said
