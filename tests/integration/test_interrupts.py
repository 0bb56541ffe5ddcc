"""Signals during each stage of `ckptprof run`: SIGINT, SIGTERM, or two Ctrl-C in quick succession.

Whatever the stage - the probe, the cache preparation, the replay, the faithful pass, the prediction check, the
final writes - the run exits 130, saves a session that says where it stopped, prints no traceback, and leaves no
rank process behind. The stage is entered for certain through the fault-injection hooks (ckptprof.stage_hooks).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ckptprof.session import Session

SIGNALS = {
    "ctrl-c": [signal.SIGINT],
    "sigterm": [signal.SIGTERM],
    "ctrl-c-twice": [signal.SIGINT, signal.SIGINT],
}


def start(ckpt: Path, tmp: Path, stage: str, extra: list[str], hold: float = 60.0) -> subprocess.Popen[str]:
    marks = tmp / "marks"
    marks.mkdir()
    env = {
        **os.environ,
        "CKPTPROF_FAULT_MARK_DIR": str(marks),
        "CKPTPROF_FAULT_DELAY_S": "0.4",  # every finished shard waits: a replay pass lasts seconds
        "OMP_NUM_THREADS": "1",
    }
    if stage in ("probe", "cache", "check", "report"):
        env["CKPTPROF_FAULT_HOLD_STAGE"] = stage
        env["CKPTPROF_FAULT_HOLD_S"] = str(hold)
    cmd = [sys.executable, "-m", "ckptprof", "run", str(ckpt), "--tp", "2", "--devices", "cpu", "-q"]
    cmd += ["-o", str(tmp / "out"), "--strategy", "sglang", *extra]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {path.name}: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.05)


def send(proc: subprocess.Popen[str], signals: list[int]) -> None:
    for i, sig in enumerate(signals):
        if i:
            time.sleep(0.05)  # "in quick succession": the second lands while the first is being handled
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # a terminal's Ctrl-C reaches the whole process group
        else:
            proc.send_signal(sig)  # a scheduler's or `kill`'s SIGTERM reaches ckptprof itself


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


STAGE_ARGS = {
    "probe": ["--probe-sample", "8MB"],
    "cache": ["--probe-sample", "8MB"],
    "replay": ["--no-probe"],
    "faithful": ["--no-probe", "--faithful"],
    "check": ["--probe-sample", "8MB", "--check-predictions"],
    "report": ["--no-probe"],
}


@pytest.mark.parametrize("how", list(SIGNALS))
@pytest.mark.parametrize("stage", list(STAGE_ARGS))
def test_a_signal_in_any_stage_saves_a_session_that_says_where_it_stopped(
    small_draft: Path, tmp_path: Path, stage: str, how: str
) -> None:
    proc = start(small_draft, tmp_path, stage, STAGE_ARGS[stage], hold=3.0 if stage == "report" else 60.0)
    marks = tmp_path / "marks"
    wait_for(marks / f"stage-{stage}", proc)
    if stage in ("replay", "faithful"):
        wait_for(marks / "rank0", proc)  # a rank of this pass has finished a shard: the pass is under way
    children = descendants(proc.pid)
    send(proc, SIGNALS[how])
    out, err = proc.communicate(timeout=90)

    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    session = Session.load(tmp_path / "out" / "session.json")
    by = "SIGTERM" if how == "sigterm" else "Ctrl-C"
    if stage == "report":
        # The work was done when the signal came: the session is whole, only the exit code says it was cut.
        assert session.verdict.achieved_GBps is not None
        assert all(r.status == "ok" for r in session.ranks)
    elif stage == "check":
        assert any(f"interrupted ({by}) while checking the predictions" in n for n in session.notes)
        assert all(r.status == "ok" for r in session.ranks)
    else:
        expected = {
            "probe": "probe",
            "cache": "cache preparation",
            "replay": "replay",
            "faithful": "faithful pass",
        }
        assert session.extra["interrupted"] == {"stage": expected[stage], "by": by}
        assert f"interrupted ({by}) during the {expected[stage]}" in session.verdict.incomplete[0]
        assert session.verdict.achieved_GBps is None
        assert f"interrupted ({by}) during the {expected[stage]}" in err
        assert [m.role for m in session.models] == ["target"]
    if stage == "probe":
        assert session.ranks == []
        assert "no rank replayed anything" in out
    if stage == "cache":
        assert session.ceilings.storage_read_GBps is not None  # the finished probe is kept
        assert session.ranks == []
    if stage == "replay":
        assert all(r.status == "failed" for r in session.ranks)
        assert sum(len(m.shards) for r in session.ranks for m in r.models) > 0  # what was measured is kept
    if stage == "faithful":
        assert all(r.status == "ok" for r in session.ranks)  # the decomposed pass had finished
        assert any("faithful pass was interrupted" in n for n in session.notes)
    time.sleep(0.5)
    alive = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, alive
