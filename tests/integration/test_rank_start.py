"""Where the ranks come from (ckptprof/loader/rank_start.py): forks of a server that imported torch once, which must
still see the caller's environment and must not outlive or replace ranks it started."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

import ckptprof
from ckptprof.errors import UsageError
from ckptprof.loader import rank_start


def server_pid() -> int | None:
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver
    pid: int | None = server._forkserver_pid
    return pid


def replay_marks(small_draft: Path, marks: Path) -> set[str]:
    """Replay the draft on two ranks; the ranks leave a mark per shard where CKPTPROF_FAULT_MARK_DIR says."""
    session = ckptprof.replay(small_draft, probe=False, devices="cpu", tp=2, cache="warm", strategy="sglang")
    assert [r.status for r in session.ranks] == ["ok", "ok"]
    return {
        p.name for p in marks.iterdir() if p.name.startswith("rank")
    }  # (the run marks its stages there too)


def wait_for_eof(conn: Any) -> None:
    """A fork that stays alive until the other end of its pipe closes."""
    with contextlib.suppress(EOFError):
        conn.recv()


@pytest.fixture
def forkserver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rank_start.ENV_START_METHOD, raising=False)


def test_ranks_are_forks_of_the_server_and_see_a_variable_set_after_it_started(
    forkserver: None, small_draft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a running server, then a variable the ranks read, set afterwards
    rank_start.warm()
    first = server_pid()
    assert first is not None and psutil.Process(first).ppid() == os.getpid()
    monkeypatch.setenv("CKPTPROF_FAULT_MARK_DIR", str(tmp_path))
    # WHEN two ranks replay
    marks = replay_marks(small_draft, tmp_path)
    # THEN each saw it (a mark per rank), from a fresh server: the old one's environment was stale
    assert marks == {"rank0", "rank1"}
    assert server_pid() not in (None, first)


def test_a_live_rank_keeps_its_server_and_the_next_ranks_still_see_the_callers_environment(
    forkserver: None, small_draft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a fork of the server that is still alive (as the pytest plugin's resident ranks stay between rounds)
    ctx = rank_start.context()
    first = server_pid()
    reader, writer = ctx.Pipe(duplex=False)
    alive = ctx.Process(target=wait_for_eof, args=(reader,), daemon=True)
    alive.start()
    rank_start.track(alive)
    try:
        # WHEN the caller's environment changes and two ranks replay
        monkeypatch.setenv("CKPTPROF_FAULT_MARK_DIR", str(tmp_path))
        marks = replay_marks(small_draft, tmp_path)
        # THEN the server was kept (replacing it would have killed the live fork), and the ranks saw the variable
        assert server_pid() == first
        assert alive.is_alive()
        assert marks == {"rank0", "rank1"}
    finally:
        writer.close()
        alive.join(timeout=30)
        alive.kill()


def test_spawn_is_still_there_when_asked_for(small_draft: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rank_start.ENV_START_METHOD, "spawn")
    assert rank_start.start_method() == "spawn"
    session = ckptprof.replay(small_draft, probe=False, devices="cpu", tp=2, cache="warm", strategy="sglang")
    assert [r.status for r in session.ranks] == ["ok", "ok"]


def test_an_unknown_start_method_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rank_start.ENV_START_METHOD, "fork")
    with pytest.raises(UsageError, match="CKPTPROF_RANK_START='fork': expected forkserver or spawn"):
        rank_start.start_method()
