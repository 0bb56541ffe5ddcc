"""Faults during a run: a rank killed mid-replay, and Ctrl-C. No hang, no orphan, a session that says why."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ckptprof.session import Session


def start_run(ckpt: Path, out: Path, tp: int = 2, delay: float = 0.4) -> subprocess.Popen[str]:
    out.mkdir(parents=True)
    env = {
        **os.environ,
        "CKPTPROF_FAULT_DELAY_S": str(delay),
        "CKPTPROF_FAULT_MARK_DIR": str(out),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "ckptprof",
        "run",
        str(ckpt),
        "--tp",
        str(tp),
        "--devices",
        "cpu",
        "--no-probe",
        "-q",
        "-o",
        str(out),
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def rank_processes(parent: int, count: int, timeout: float = 60.0) -> list[psutil.Process]:
    """The rank processes (by their title: not the fork server or the resource tracker), once they have started loading.

    The deadlines here and in ``loading`` are hang guards for the waits, not claims about speed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = psutil.Process(parent).children(recursive=True)
            ranks = [k for k in kids if k.name().startswith("ckptprof:TP")]
        except psutil.Error:
            ranks = []
        if len(ranks) == count:
            return ranks
        time.sleep(0.1)
    raise AssertionError(f"{count} rank processes did not start")


def loading(out: Path, rank: int, timeout: float = 60.0) -> None:
    """Wait until the rank has finished a shard: it is past the start barrier and reading."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / f"rank{rank}").exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} never finished a shard")


def test_killed_rank_is_marked_failed_within_seconds(small_draft: Path, tmp_path: Path) -> None:
    proc = start_run(small_draft, tmp_path / "out")
    ranks = rank_processes(proc.pid, 2)
    victim = ranks[1]
    loading(tmp_path / "out", 1)
    victim.send_signal(signal.SIGKILL)
    # A hang guard, not a speed claim: a run that never notices the death fails here with TimeoutExpired.
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    session = Session.load(tmp_path / "out" / "session.json")
    failed = [r for r in session.ranks if r.status == "failed"]
    assert len(failed) == 1
    # THEN the death itself was noticed (its signal is named), not a silence waited out by the rank timeout
    assert "SIGKILL" in (failed[0].error or "") and "no progress" not in (failed[0].error or "")
    # AND the killed rank keeps what it had reported, mid-load (1 to 7 of its 8 shards); the other one finished
    assert 0 < sum(len(m.shards) for m in failed[0].models) < 8
    assert any(r.status == "ok" for r in session.ranks)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks)


def test_ctrl_c_saves_a_partial_session_and_leaves_no_child(small_draft: Path, tmp_path: Path) -> None:
    proc = start_run(small_draft, tmp_path / "out", tp=2)
    ranks = rank_processes(proc.pid, 2)
    everyone = psutil.Process(proc.pid).children(recursive=True)
    loading(tmp_path / "out", 0)
    os.killpg(proc.pid, signal.SIGINT)
    # A hang guard, not a speed claim: a run that waits for its ranks after Ctrl-C fails here with TimeoutExpired.
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    session = Session.load(tmp_path / "out" / "session.json")
    assert any("interrupted" in n for n in session.notes)
    assert all(r.status == "failed" for r in session.ranks)
    # THEN what was measured is kept, and the ranks were stopped, not let finish: fewer than their 2 x 8 shards
    # (each shard takes 0.4 s more here, so finishing would take the ranks another ~3 s)
    assert 0 < sum(len(m.shards) for r in session.ranks for m in r.models) < 2 * 8
    time.sleep(0.5)
    alive = [p for p in [*ranks, *everyone] if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, alive


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_stopped_run_leaves_no_child(small_draft: Path, tmp_path: Path, signum: int) -> None:
    # GIVEN ranks that would need 8 shards x 3 s to finish
    proc = start_run(small_draft, tmp_path / "out", delay=3.0)
    ranks = rank_processes(proc.pid, 2)
    time.sleep(2.0)
    # WHEN the ckptprof process itself is terminated or killed
    proc.send_signal(signum)
    proc.communicate(timeout=60)
    # THEN no rank outlives it (SIGTERM: stopped by ckptprof; SIGKILL: by the kernel's parent-death signal); the
    # wait for them to go has a deadline so that one that lives on fails the test instead of hanging it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks
    ):
        time.sleep(0.1)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks)
    if signum == signal.SIGTERM:
        assert proc.returncode == 130
        assert Session.load(tmp_path / "out" / "session.json").notes


def test_rank_out_of_memory_is_marked_failed_with_the_message(small_draft: Path, tmp_path: Path) -> None:
    # GIVEN rank 1 may map only 2 MB more than it has after importing torch: it cannot allocate its parameters
    env = {
        **os.environ,
        "CKPTPROF_FAULT_RANK_MEMORY_MB": "2",
        "CKPTPROF_FAULT_RANK": "1",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "ckptprof",
        "run",
        str(small_draft),
        "--tp",
        "2",
        "--devices",
        "cpu",
        "--no-probe",
        "-q",
        "-o",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    # THEN the run ends (no hang) with exit 2: rank 1 failed with the allocator's message, and rank 0, which was
    # waiting for it at the start barrier, says why it stopped (a TP group with a dead rank cannot load)
    assert proc.returncode == 2, proc.stderr
    session = Session.load(tmp_path / "session.json")
    by_rank = {r.rank: r for r in session.ranks}
    assert by_rank[1].status == "failed"
    assert "memory" in (by_rank[1].error or "").lower()
    assert "another rank died before the start barrier" in (by_rank[0].error or "")
    assert "Traceback" not in proc.stderr


def test_a_hung_rank_is_stopped_by_the_rank_timeout(small_draft: Path, tmp_path: Path) -> None:
    # GIVEN ranks that stall 30 s after every shard, and at most 15 s allowed without any rank reporting progress
    # (the limit also covers a rank's start, importing torch: 5 s was too little on a busy 2-core machine, where
    # the run then stopped before any shard and the test failed)
    env = {
        **os.environ,
        "CKPTPROF_FAULT_DELAY_S": "30",
        "CKPTPROF_RANK_TIMEOUT_S": "15",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "ckptprof",
        "run",
        str(small_draft),
        "--tp",
        "2",
        "--devices",
        "cpu",
        "--no-probe",
        "-q",
        "-o",
        str(tmp_path),
    ]
    # A hang guard, not a speed claim: a rank timeout that never fires fails here with TimeoutExpired.
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    # THEN the run ends by the timeout's path: each rank failed with "no progress", the shards it finished kept,
    # and none was let finish its 8 shards (8 x 30 s of stalls)
    assert proc.returncode == 2, proc.stderr
    session = Session.load(tmp_path / "session.json")
    assert all("no progress for 15 s" in (r.error or "") for r in session.ranks)
    assert any(m.shards for r in session.ranks for m in r.models)
    assert all(sum(len(m.shards) for m in r.models) < 8 for r in session.ranks)


def test_a_rank_process_that_cannot_start_raises_its_own_error_and_stops_the_others(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing.process

    from ckptprof.loader import ranks
    from ckptprof.loader.plan import build_plan

    # GIVEN a launch where rank 1's process cannot be created (out of PIDs, out of memory, ...)
    real_start = multiprocessing.process.BaseProcess.start
    started: list[multiprocessing.process.BaseProcess] = []

    def start(self: multiprocessing.process.BaseProcess) -> None:
        if self.name == "rank1":
            raise OSError(11, "Resource temporarily unavailable")
        real_start(self)
        started.append(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    # WHEN the ranks are spawned
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        ranks.run_spawned(build_plan(small_draft, tp=2, devices="cpu"))
    # THEN the launch fails with that error (not an AssertionError from joining the unstarted process), and
    # rank 0, already started and waiting at the barrier, was stopped
    assert [p.name for p in started] == ["rank0"]
    assert not started[0].is_alive()


@pytest.mark.parametrize(
    ("fault_in", "expect"),
    [
        # populate (the default): madvise answers the pages past the new end with EFAULT, the shard fails
        ("populate", "shard"),
        # touch: reading a mapped page past the end is SIGBUS, which kills the rank
        ("touch", "rank"),
    ],
)
def test_a_shard_truncated_while_it_is_read_is_named_with_the_cause(
    small_draft: Path, tmp_path: Path, fault_in: str, expect: str
) -> None:
    # GIVEN a copy of the checkpoint (the test truncates a file) replayed slowly by two ranks
    ckpt = tmp_path / "ckpt"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[-1]
    size = victim.stat().st_size
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "CKPTPROF_FAULT_DELAY_S": "0.4",
        "CKPTPROF_FAULT_MARK_DIR": str(out),
        "CKPTPROF_FAULT_IN": fault_in,
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "ckptprof", "run", str(ckpt), "--tp", "2", "--devices", "cpu", "--no-probe"]
    cmd += ["-q", "-o", str(out), "--strategy", "sglang-mt"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # WHEN the last shard loses half its bytes after the ranks have opened it (the multithread loader maps eight
    # files ahead) and before they reach it
    loading(out, 0)
    os.truncate(victim, size // 2)
    _, err = proc.communicate(timeout=120)
    # THEN the run fails (exit 2) and the error names the file and the cause, not a bare signal or errno
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    session = Session.load(out / "session.json")
    cause = "shrank while it was read"
    if expect == "rank":
        failed = [r for r in session.ranks if r.status == "failed"]
        assert failed and all("SIGBUS" in (r.error or "") for r in failed)
        assert all(victim.name in (r.error or "") and cause in (r.error or "") for r in failed)
    else:
        shards = [s for r in session.ranks for m in r.models for s in m.shards if s.status == "failed"]
        assert shards and all(s.file == victim.name and cause in (s.error or "") for s in shards)
    assert victim.name in err and cause in err


def test_a_shard_that_grew_before_it_is_read_is_named_with_sizes_and_mtime(
    small_draft: Path, tmp_path: Path
) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    from ckptprof.units import human_bytes

    # GIVEN a copy of the checkpoint, and a replacement for its last shard holding the same tensors twice as large
    # in every dimension (a re-export over the old files): the plan made at the start no longer fits it (doubling
    # only the split dimension would not show, as each rank cuts its slice where the plan says)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[-1]
    size = victim.stat().st_size
    grown = tmp_path / "grown.safetensors"
    with safe_open(str(victim), framework="pt") as f:
        names = f.keys()  # a safe_open handle is not iterable
        bigger = {k: t.repeat(*[2] * t.dim()) for k in names for t in [f.get_tensor(k)]}
        save_file(bigger, str(grown), metadata=f.metadata())
    grown_size = grown.stat().st_size
    assert grown_size > size
    # WHEN the shard is replaced after the plan was made (headers read, sizes taken) and before the replay starts:
    # the replay stage is held until the test has replaced it (a window, not a timing claim: the test replaces the
    # file as soon as the stage's mark appears, and the hold only has to outlast that)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "CKPTPROF_FAULT_MARK_DIR": str(out),
        "CKPTPROF_FAULT_HOLD_STAGE": "replay",
        "CKPTPROF_FAULT_HOLD_S": "5",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "ckptprof", "run", str(ckpt), "--tp", "2", "--devices", "cpu", "--no-probe"]
    cmd += ["-q", "-o", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60  # a hang guard for the wait
    while not (out / "stage-replay").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the replay stage never began"
        time.sleep(0.02)
    os.replace(grown, victim)
    _, err = proc.communicate(timeout=120)
    # THEN the run fails (exit 2) and the shard's failure says the file changed since the run started, with its
    # size then and now and its modification time, before any raw tensor-shape error from torch
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    session = Session.load(out / "session.json")
    shards = [s for r in session.ranks for m in r.models for s in m.shards if s.status == "failed"]
    assert shards and all(s.file == victim.name for s in shards)
    for s in shards:
        error = s.error or ""
        assert error.startswith("the file changed since the run started"), error
        assert human_bytes(size) in error and human_bytes(grown_size) in error and "modified" in error, error
    assert victim.name in err and "changed since the run started" in err
