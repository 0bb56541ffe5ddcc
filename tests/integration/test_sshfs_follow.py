"""`ckptprof log -f` on a log that lives on a network file system (sshfs over a private sshd): the client caches the
file's size, so a follower that only reads sees nothing new until that cache expires (#31 item 6)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_bootlog_follow import follow_lag, start_writer  # type: ignore[import-not-found]

if TYPE_CHECKING:
    from conftest import SshfsMount

pytestmark = [pytest.mark.sshfs]


def test_follow_keeps_up_with_a_log_on_sshfs(sshfs_mount: SshfsMount) -> None:
    """GIVEN a server writing 5,000 lines a second for 8 s, then `ready`, into a log that is followed through an
    sshfs mount (the writer on the server's side) WHEN followed with the CLI's settings THEN `ready` is reported
    within a second of its being written (sshfs keeps a file's size for 20 s unless the file is opened again)."""
    log = sshfs_mount.source / "server.log"
    log.write_bytes(b"")
    writer = start_writer(log, rate=5000, seconds=8.0, rotate_at=1e9, mode="none")
    lag, outcome = follow_lag(sshfs_mount.mount / "server.log", writer, io.StringIO(), timeout_s=60)
    assert getattr(outcome, "reason", None) == "ready"
    assert lag < 1.0, f"`ready` reported {lag:.2f} s after it was written"


@pytest.mark.parametrize("mode", ["rename", "truncate"])
def test_follow_follows_a_rotated_log_on_sshfs(sshfs_mount: SshfsMount, mode: str) -> None:
    """GIVEN a log on the server rotated while it is followed through sshfs, `ready` written to the new file
    WHEN followed THEN the follower says so and reports `ready`. sshfs numbers a file by its path (no stable inode
    without -o use_ino) and answers fstat through the name: the follower can only tell the files apart by what
    they hold."""
    log = sshfs_mount.source / "server.log"
    log.write_bytes(b"")
    writer = start_writer(log, rate=500, seconds=3.0, rotate_at=1.0, mode=mode)
    status = io.StringIO()
    lag, outcome = follow_lag(sshfs_mount.mount / "server.log", writer, status, timeout_s=20)
    assert getattr(outcome, "reason", None) == "ready", status.getvalue()[-2000:]
    said = "renamed" if mode == "rename" else "truncated"
    assert [said in r for r in outcome.rotations] == [True], outcome.rotations
    assert lag < 1.0, f"`ready` reported {lag:.2f} s after it was written"
