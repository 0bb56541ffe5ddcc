"""A network file system that stops answering or vanishes mid-run (#31 items 1-3): sshfs served by a private sshd
whose server is SIGSTOPped (frozen: every request on the mount waits, readers sit in the kernel) or SIGKILLed
(the mount goes away). ckptprof must end, save the session, name the file system and the stuck read.

Each run's output goes to files, not pipes: a rank left behind in an uninterruptible wait holds the pipes it
inherited, and a test reading them to EOF would wait for it. Every test continues the server in a ``finally``
(and the fixture again before it unmounts), so no reader stays stuck after the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from ckptprof.checkpoint.synth import synthesize
from ckptprof.session import Session

if TYPE_CHECKING:
    from conftest import SshfsMount

pytestmark = [pytest.mark.sshfs]

# Hang guards, not speed claims: a run that does not end within these fails the test instead of hanging CI.
_START_GUARD_S = 90.0
_EXIT_GUARD_S = 60.0
# Long enough for a rank to import torch on a busy 2-core machine (the limit covers a rank's start too): 15 s was
# not, with a second test run beside CI's (ranks still in torch's import when the timeout fired).
_RANK_TIMEOUT_S = 30


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    out: Path

    @property
    def stderr(self) -> str:
        return (self.out / "stderr.txt").read_text(errors="replace")

    def session(self) -> Session:
        return Session.load(self.out / "session.json")

    def ranks(self) -> list[psutil.Process]:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        return [k for k in kids if k.name().startswith("ckptprof:TP")]


@pytest.fixture
def checkpoint(sshfs_mount: SshfsMount) -> Iterator[tuple[SshfsMount, Path]]:
    """A small 4-shard checkpoint served over sshfs; the server is continued whatever the test did to it."""
    synthesize(sshfs_mount.source / "ck", preset="eagle3-draft", shards=4, size=8_000_000, seed=5)
    try:
        yield sshfs_mount, sshfs_mount.mount / "ck"
    finally:
        sshfs_mount.thaw_server()


def start(ckpt: Path, tmp_path: Path, *extra: str) -> Run:
    out = tmp_path / "out"
    out.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    # One shard at a time (sglang's default path), a second's pause after each: a rank is between two shards,
    # its next open and reads still to come, when the test acts on the server.
    env = {
        **os.environ,
        "CKPTPROF_FAULT_DELAY_S": "1",
        "CKPTPROF_FAULT_MARK_DIR": str(marks),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "ckptprof", "run", str(ckpt), "--tp", "2", "--devices", "cpu", "--no-probe"]
    cmd += ["--strategy", "sglang", "--cache", "as-is", "-q", "-o", str(out), *extra]
    with open(out / "stdout.txt", "wb") as so, open(out / "stderr.txt", "wb") as se:
        proc = subprocess.Popen(cmd, env=env, stdout=so, stderr=se, start_new_session=True)
    deadline = time.monotonic() + _START_GUARD_S
    while not (marks / "rank0").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"rank 0 never finished a shard: {(out / 'stderr.txt').read_text()}")
        time.sleep(0.05)
    return Run(proc, out)


def wait_exit(run: Run) -> float:
    """Seconds until the ckptprof process exits; fails (killing it) past the guard."""
    began = time.monotonic()
    try:
        run.proc.wait(timeout=_EXIT_GUARD_S + _RANK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.wait()
        raise AssertionError(f"ckptprof did not exit: {run.stderr[-2000:]}") from None
    return time.monotonic() - began


def assert_ranks_end(ranks: list[psutil.Process]) -> None:
    """Once the server answers again, the ranks left behind end (their SIGKILL was pending): nothing lingers."""
    deadline = time.monotonic() + 15  # a hang guard for the wait
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks):
        assert time.monotonic() < deadline, [(p.pid, p.status()) for p in ranks if p.is_running()]
        time.sleep(0.1)


def test_a_frozen_mount_ends_the_run_naming_the_file_system_and_the_stuck_read(
    checkpoint: tuple[SshfsMount, Path], tmp_path: Path
) -> None:
    mount, ckpt = checkpoint
    # GIVEN a run over sshfs with a rank timeout, one shard into the load
    run = start(ckpt, tmp_path, "--rank-timeout", str(_RANK_TIMEOUT_S))
    ranks = run.ranks()
    # WHEN the server stops answering
    mount.freeze_server()
    seconds = wait_exit(run)
    print(f"\nexit {seconds:.1f} s after the freeze (rank timeout {_RANK_TIMEOUT_S} s)")
    # THEN ckptprof exits (2: failed ranks) with the session saved, each rank failed by the timeout with the cause:
    # the file system at the mount point stopped answering
    assert run.proc.returncode == 2, run.stderr
    session = run.session()
    assert session.ranks and all(r.status == "failed" for r in session.ranks)
    for r in session.ranks:
        error = r.error or ""
        assert f"no progress for {_RANK_TIMEOUT_S} s" in error, error
        assert f"fuse.sshfs file system at {mount.mount} stopped answering" in error, error
        # AND its stuck read: the pid, the shard and the kernel wait; its Python stack (py-spy --nonblocking)
        stuck = r.stuck
        assert stuck is not None and f"pid {stuck.pid}" in error
        assert (
            stuck.file is not None and Path(stuck.file).parent == ckpt and stuck.file.endswith(".safetensors")
        )
        assert stuck.phase and stuck.fs_type == "fuse.sshfs" and stuck.mount_point == str(mount.mount)
        assert stuck.wchan and stuck.kernel_stack, stuck
        assert stuck.python_stack, stuck.python_stack_note
        assert any("ckptprof" in frame for frame in stuck.python_stack), stuck.python_stack
    # AND a rank still alive now (waiting in the kernel) was listed as left behind, not joined
    alive = {p.pid for p in ranks if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}
    for r in session.ranks:
        if r.stuck is not None and r.stuck.pid in alive:
            assert r.stuck.abandoned and "left behind" in (r.error or "")
    assert "stopped answering" in run.stderr
    mount.thaw_server()
    assert_ranks_end(ranks)


def test_sigterm_under_a_frozen_mount_saves_the_session_and_exits(
    checkpoint: tuple[SshfsMount, Path], tmp_path: Path
) -> None:
    mount, ckpt = checkpoint
    # GIVEN a run with the default rank timeout (30 minutes), one shard into the load, whose server stops answering
    run = start(ckpt, tmp_path)
    ranks = run.ranks()
    mount.freeze_server()
    time.sleep(3)  # every rank has gone on to its next shard and waits on the mount
    # WHEN ckptprof is told to stop
    run.proc.send_signal(signal.SIGTERM)
    seconds = wait_exit(run)
    print(f"\nexit {seconds:.1f} s after SIGTERM")
    # THEN it saves what it measured and exits as interrupted, naming what it left behind
    assert run.proc.returncode == 130, run.stderr
    session = run.session()
    assert any("interrupted" in n for n in session.notes)
    for r in session.ranks:
        assert "interrupted (SIGTERM)" in (r.error or ""), r.error
    # (a rank waiting on the frozen mount cannot be stopped: SIGKILL stays pending while FUSE waits out a request
    # already handed to sshfs; such a rank is left behind with its pid, wait and shard, and the cause named)
    behind = [r for r in session.ranks if r.stuck is not None and r.stuck.abandoned]
    assert behind, [r.error for r in session.ranks]
    for r in behind:
        assert f"fuse.sshfs file system at {mount.mount} stopped answering" in (r.error or ""), r.error
        assert r.stuck is not None and f"pid {r.stuck.pid}" in (r.error or "") and r.stuck.wchan
    mount.thaw_server()
    assert_ranks_end(ranks)


def test_a_vanished_server_is_named_with_its_errno_not_a_removed_file(
    checkpoint: tuple[SshfsMount, Path], tmp_path: Path
) -> None:
    mount, ckpt = checkpoint
    # GIVEN a run over sshfs, one shard into the load
    run = start(ckpt, tmp_path, "--rank-timeout", str(_RANK_TIMEOUT_S))
    # WHEN the server dies (sshfs loses its connection, exits, and the mount goes away)
    mount.kill_server()
    wait_exit(run)
    # THEN the failed shards say the mount went away, with the errno met, and never that a file was removed
    assert run.proc.returncode == 2, run.stderr
    session = run.session()
    failed = [s for r in session.ranks for m in r.models for s in m.shards if s.status == "failed"]
    errors = [s.error or "" for s in failed] + [r.error or "" for r in session.ranks if r.status == "failed"]
    assert errors, run.stderr
    for error in errors:
        assert "removed" not in error, error
        assert f"fuse.sshfs mount at {mount.mount}" in error, error
        # the errno met (a mapped page's SIGBUS names the signal: it carries no errno)
        assert any(
            name in error for name in ("ENOENT", "ENOTCONN", "EIO", "ECONNABORTED", "EFAULT", "SIGBUS")
        ), error
    assert "removed" not in run.stderr


def test_a_stuck_rank_round_trips_through_the_session_and_bad_values_are_refused(tmp_path: Path) -> None:
    from ckptprof.errors import SessionFileError
    from ckptprof.results import StuckRank
    from ckptprof.session import RankResult

    # GIVEN a session whose rank carries where it was stuck
    stuck = StuckRank(pid=42, state="D (uninterruptible wait)", phase="read", syscall="pread64", file="/m/a.st",
                      offset=4096, length=8192, wchan="request_wait_answer", kernel_stack=("request_wait_answer",),
                      python_stack=("fault_in (ckptprof/loader/touch.py:20)",), abandoned=True)  # fmt: skip
    session = Session(ranks=[RankResult(rank=0, device="cpu", status="failed", error="x", stuck=stuck)])
    path = session.save(tmp_path / "s.json")
    # THEN it loads back equal, and a session from before the field (no "stuck") still loads
    assert Session.load(path).ranks[0].stuck == stuck
    assert "bytes 4096-12287" in stuck.where()
    doc = session.to_dict()
    del doc["ranks"][0]["stuck"]
    assert Session.from_dict(doc).ranks[0].stuck is None
    # AND impossible values are refused with the field named
    import json

    for key, bad in (("offset", -1), ("pid", "x"), ("kernel_stack", "a"), ("abandoned", 1)):
        doc = session.to_dict()
        doc["ranks"][0]["stuck"][key] = bad
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        with pytest.raises(SessionFileError, match=f"ranks\\[0\\].stuck.{key}"):
            Session.load(tmp_path / "bad.json")


@pytest.mark.parametrize(
    ("error", "named"),
    [
        ("OSError: [Errno 107] Transport endpoint is not connected", "ENOTCONN"),
        ("SafetensorError: Error while deserializing header: Input/output error (os error 5)", "EIO"),
        ("OSError: [Errno 116] Stale file handle", "ESTALE"),
        ("OSError: [Errno 110] Connection timed out", "ETIMEDOUT"),
    ],
)
def test_a_network_errno_is_named_with_what_it_means_for_the_mount(
    monkeypatch: pytest.MonkeyPatch, error: str, named: str
) -> None:
    from ckptprof.loader import changed
    from ckptprof.loader.plan import ModelPlan, ReplayPlan, ShardPlan

    # GIVEN a shard on a network mount that is still mounted (its daemon alive or the mount still listed)
    shard = ShardPlan(path="/mnt/ck/a.safetensors", bytes=10, tensors={})
    plan = ReplayPlan(models=[ModelPlan(role="target", path="/mnt/ck", fs_type="fuse.sshfs", shards=[shard])])
    monkeypatch.setattr(changed, "mount_of", lambda path: ("/mnt", "fuse.sshfs"))
    # WHEN the read failed with a network file system's errno
    explained = changed.explain_shard_error(plan, "a.safetensors", error)
    # THEN the errno is named with what it means there, the original error kept, and no file called removed
    assert explained.startswith(f"{named} (") and "fuse.sshfs mount at /mnt" in explained, explained
    assert explained.endswith(error) and "removed" not in explained


def test_a_stopped_rank_that_times_out_gets_its_shard_and_python_stack(
    small_draft: Path, tmp_path: Path
) -> None:
    # GIVEN a local run whose rank 1 is SIGSTOPped one shard into the load (py-spy's blocking dump of a stopped
    # process gives no frame: it waits for the process to stop for it)
    run = start(small_draft, tmp_path, "--rank-timeout", str(_RANK_TIMEOUT_S))
    marks = tmp_path / "marks"
    deadline = time.monotonic() + _START_GUARD_S
    while not (marks / "rank1").exists():
        assert time.monotonic() < deadline and run.proc.poll() is None, run.stderr
        time.sleep(0.05)
    victim = max(run.ranks(), key=lambda p: p.pid)  # spawned in rank order: rank 1
    try:
        victim.send_signal(signal.SIGSTOP)
        wait_exit(run)
    finally:
        with contextlib.suppress(psutil.Error):
            victim.send_signal(signal.SIGKILL)
    # THEN the stopped rank failed by the timeout, and its result says where it stood
    session = run.session()
    stopped = next(r for r in session.ranks if r.stuck is not None and r.stuck.pid == victim.pid)
    stuck = stopped.stuck
    assert stuck is not None and stuck.state.startswith("T"), stuck
    assert stuck.file is not None and Path(stuck.file).parent == small_draft, stuck
    assert any("ckptprof" in frame for frame in stuck.python_stack), stuck.python_stack_note
    assert f"pid {victim.pid}" in (stopped.error or "") and "no progress" in (stopped.error or "")


@pytest.mark.parametrize(
    ("error", "named"),
    [
        ("FileNotFoundError: [Errno 2] No such file or directory: '/mnt/ck/a.safetensors'", "ENOENT"),
        ("OSError: [Errno 14] Bad address", "EFAULT"),
        ("OSError: [Errno 107] Transport endpoint is not connected", "ENOTCONN"),
    ],
)
def test_a_mount_that_went_away_is_named_by_its_mount_point(
    monkeypatch: pytest.MonkeyPatch, error: str, named: str
) -> None:
    from ckptprof.loader import changed
    from ckptprof.loader.plan import ModelPlan, ReplayPlan, ShardPlan

    # GIVEN a run that started with its checkpoint on an sshfs mount at /mnt, which is no longer mounted: the path
    # now lies on the root file system (sshfs exits when its connection drops, and its mount goes with it)
    shard = ShardPlan(path="/mnt/ck/a.safetensors", bytes=10, tensors={})
    plan = ReplayPlan(models=[ModelPlan(role="target", path="/mnt/ck", fs_type="fuse.sshfs", shards=[shard])])
    monkeypatch.setattr(changed, "_MOUNTS_AT_START", {})
    monkeypatch.setattr(changed, "mount_of", lambda path: ("/mnt", "fuse.sshfs"))
    changed.remember_mounts(plan)
    monkeypatch.setattr(changed, "mount_of", lambda path: ("/", "ext4"))
    # WHEN a shard failed, or a rank died of SIGBUS on a mapped page
    shard_error = changed.explain_shard_error(plan, "a.safetensors", error)
    rank_error = changed.explain_signal_death(plan, "rank process killed by SIGBUS", "SIGBUS")
    # THEN both say the mount at /mnt went away, with what the read met, and never that a file was removed
    for explained in (shard_error, rank_error):
        assert explained.count("the fuse.sshfs mount at /mnt went away while it was read") == 1, explained
        assert "removed" not in explained and "now lies on ext4 at /" in explained
    assert named in shard_error and "SIGBUS" in rank_error
