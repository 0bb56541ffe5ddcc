"""``--follow``: tail a growing boot log, keep one status line up to date, stop when the server is ready
(exit 0) or has failed (exit 1).

Polling with a short sleep is enough: the parser reads far faster than a server writes, so whenever data is
waiting it is read straight away and the sleep only happens once the reader has caught up.

Like ``tail -F``, the follower follows the name, not the file: once it has read the open file to its end and the
name now holds another file (logrotate renamed the log away and the server opened a new one), it reads the new
one, carrying on with the same boot; a file truncated in place (copytruncate, a restarted server) is read again
from the start. Either is said on the status stream when it is seen, and kept in ``FollowOutcome.rotations``.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from ckptprof.bootlog.parse import CHUNK_BYTES, LineSplitter, LogInputError, Utf8Text, open_log
from ckptprof.bootlog.phases import STALL_AFTER_S, BootLogAnalyzer, BootReport

POLL_S = 0.2
REDRAW_EVERY_S = 0.5
# A traceback is only taken as the end of the boot once the log has stayed quiet this long: a rank that
# survives a non-fatal traceback keeps logging, and the report then downgrades it to a warning.
FAILURE_GRACE_S = 1.0
# The first bytes of a followed file: timestamps and the server's arguments, which a new log does not repeat.
HEAD_BYTES = 4096


@dataclass(frozen=True)
class FollowOutcome:
    exit_code: int  # 0 ready, 1 failed, timed out, or the input ended before the server was ready
    reason: str  # "ready", "failed", "timeout" or "ended"
    report: BootReport
    rotations: tuple[str, ...] = ()  # what happened to the file while it was followed, as said at the time


class StatusLine:
    """One line redrawn in place on a terminal; on a pipe, a new line only when the text changes."""

    def __init__(self, stream: TextIO, clock: Callable[[], float], every_s: float = REDRAW_EVERY_S) -> None:
        self._stream = stream
        self._clock = clock
        self._every_s = every_s
        self._last_draw = float("-inf")
        self._last_text = ""
        self._tty = bool(getattr(stream, "isatty", lambda: False)())

    def due(self) -> bool:
        return self._clock() - self._last_draw >= self._every_s

    def draw(self, text: str) -> None:
        self._last_draw = self._clock()
        if text == self._last_text:
            return
        self._last_text = text
        if self._tty:
            width = max(20, shutil.get_terminal_size().columns - 1)
            self._stream.write("\r" + text[:width] + "\x1b[K")
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def notice(self, text: str) -> None:
        """A line that stays (the status line is redrawn below it)."""
        self._stream.write(("\r" + text + "\x1b[K\n") if self._tty else text + "\n")
        self._last_text = ""  # a terminal's status line was overwritten: draw it again
        self._stream.flush()

    def close(self) -> None:
        if self._tty and self._last_text:
            self._stream.write("\n")
            self._stream.flush()


def follow_log(
    path: str,
    *,
    timeout_s: float | None = None,
    poll_s: float = POLL_S,
    stall_after_s: float = STALL_AFTER_S,
    status: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> FollowOutcome:
    """Follow ``path`` ("-": standard input, read until it ends) until the server is ready or has failed."""
    stream = open_log(path)
    status_line = StatusLine(status if status is not None else sys.stderr, clock)
    follower = _Follower(stream, path, stall_after_s, status_line, clock)
    try:
        return follower.run(timeout_s, poll_s, sleep)
    except OSError as exc:
        raise LogInputError(path, exc.strerror or str(exc)) from None
    finally:
        status_line.close()
        if path != "-":
            follower.close()


class _Follower:
    def __init__(
        self,
        stream: BinaryIO,
        path: str,
        stall_after_s: float,
        status_line: StatusLine,
        clock: Callable[[], float],
    ) -> None:
        self._stream = stream
        self._path = path
        self._is_file = path != "-"
        self._rotations: list[str] = []
        self._head = b""  # the first bytes of the file followed: what tells it apart where inodes cannot
        self._stall_after_s = stall_after_s
        self._status_line = status_line
        self._clock = clock
        self._reset()

    def _reset(self) -> None:
        self._analyzer = BootLogAnalyzer(self._stall_after_s)
        self._splitter = LineSplitter()
        self._text = Utf8Text()  # the file read from its start: its first bytes say how it is encoded

    def run(self, timeout_s: float | None, poll_s: float, sleep: Callable[[float], None]) -> FollowOutcome:
        started = self._clock()
        failed_since: float | None = None
        rechecked = False
        while True:
            data = self._read()
            if data:
                self._take(data)
                if self._analyzer.ready:
                    return self._outcome(0, "ready")
                if self._status_line.due():
                    self._status_line.draw(_status_text(self._analyzer.report()))
                continue
            if not self._is_file:  # standard input has ended
                self._take(b"", final=True)
                self._feed(self._splitter.flush())
                report = self._analyzer.report()
                code, reason = (
                    (0, "ready") if report.ready else (1, "failed" if report.state == "failed" else "ended")
                )
                return self._outcome(code, reason)
            if self._renamed():
                continue
            if self._truncated():
                self._stream.seek(0)
                self._head = b""
                self._reset()
                continue
            if not rechecked and self._refreshed():
                rechecked = (
                    True  # once per idle spell: a size the file cannot deliver must not spin this loop
                )
                continue
            rechecked = False
            self._feed(self._splitter.take_bar_frame())
            report = self._analyzer.report()
            self._status_line.draw(_status_text(report))
            if report.ready:
                return self._outcome(0, "ready")
            if report.state == "failed":
                failed_since = self._clock() if failed_since is None else failed_since
                if self._clock() - failed_since >= FAILURE_GRACE_S:
                    return self._outcome(1, "failed")
            else:
                failed_since = None
            if timeout_s is not None and self._clock() - started >= timeout_s:
                return self._outcome(1, "timeout")
            sleep(poll_s)

    def _read(self) -> bytes:
        if self._is_file:
            at = self._stream.tell()
            data = self._stream.read(CHUNK_BYTES)
            if at == len(self._head) < HEAD_BYTES:
                self._head += data[: HEAD_BYTES - at]
            return data
        read1 = getattr(self._stream, "read1", None)
        return read1(CHUNK_BYTES) if read1 is not None else self._stream.read(CHUNK_BYTES)

    def _take(self, data: bytes, final: bool = False) -> None:
        """Bytes of the file followed, in the order it holds them (a UTF-16 log's decoded: parse.Utf8Text)."""
        self._feed(self._splitter.feed(self._text.feed(data, final)))

    def _feed(self, block: bytes) -> None:
        if block:
            self._analyzer.feed_block(block)

    def _truncated(self) -> bool:
        """The file shrank under us (copytruncate rotation, a restarted server truncating it): start over."""
        try:
            size, read = os.fstat(self._stream.fileno()).st_size, self._stream.tell()
        except (OSError, ValueError):
            return False
        if size >= read:
            return False
        self._say(
            f"{self._name()} was truncated ({read:,} -> {size:,} bytes): reading it again from the start"
        )
        return True

    def _renamed(self) -> bool:
        """The name now holds another file (rename rotation): switch to it, once the old one is read to its end.

        Another file is one with another inode, or - where the file system numbers files by their path, as sshfs
        does - one whose first bytes differ from those read while the file held open still has them (when it does
        not, the file itself was rewritten: a truncation, for ``_truncated``). While the name holds nothing
        (renamed, the new file not made yet) the old file is followed, as ``tail -F`` does. The caller has just
        read the open file to its end; a line written to it since is read here first."""
        try:
            fresh = open(self._path, "rb")  # noqa: SIM115 - kept when it is the new file
        except OSError:
            return False  # gone, or not readable yet: keep the old file and look again at the next poll
        try:
            if not self._other_file(fresh):
                fresh.close()
                return False
        except (OSError, ValueError):
            fresh.close()
            return False
        while data := self._stream.read(CHUNK_BYTES):
            self._take(data)
        self._take(b"", final=True)
        self._stream.close()
        self._stream = fresh
        self._head = b""
        self._text = Utf8Text()  # the new file may be written in another encoding: its own first bytes say
        self._say(
            f"{self._name()} was rotated (renamed away, a new file at its name): following the new file"
        )
        return True

    def _other_file(self, fresh: BinaryIO) -> bool:
        now, held = os.fstat(fresh.fileno()), os.fstat(self._stream.fileno())
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            return True
        if not self._head:
            return False
        size = len(self._head)
        if _head_of(fresh.fileno(), size) == self._head:
            return False
        return _head_of(self._stream.fileno(), size) == self._head

    def _refreshed(self) -> bool:
        """Whether the file has grown past what was read, once the client is made to look again.

        A network file system's client caches a file's size: through sshfs a follower that only reads saw nothing
        new for 20 s (the client's attribute cache) behind a writer on the server, and NFS keeps it for seconds.
        Opening the file again makes the client ask the server (NFS's close-to-open consistency; sshfs refreshes
        its copy of the attributes on open), and statx(AT_STATX_FORCE_SYNC) makes the kernel take them rather than
        its own copy (FUSE keeps it 1 s): 13 s late through sshfs without either, 1.0 s with the open alone,
        within a poll with both. On a local file it costs an open, a close and a stat per idle poll."""
        try:
            os.close(os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            fd = self._stream.fileno()
            _force_attribute_sync(fd)
            return os.fstat(fd).st_size > self._stream.tell()
        except (OSError, ValueError):
            return False

    def _name(self) -> str:
        return os.path.basename(self._path)

    def _say(self, what: str) -> None:
        when = time.strftime("%H:%M:%S")
        log_clock = self._analyzer.report().last_timestamp
        text = f"{when}: {what}" + (f" (the log's clock: {log_clock})" if log_clock else "")
        self._rotations.append(text)
        self._status_line.notice(f"ckptprof log: {text}")

    def close(self) -> None:
        self._stream.close()

    def _outcome(self, code: int, reason: str) -> FollowOutcome:
        report = self._analyzer.report()
        self._status_line.draw(_status_text(report))
        return FollowOutcome(code, reason, report, tuple(self._rotations))


def _head_of(fd: int, size: int) -> bytes:
    """The first ``size`` bytes of the file open as ``fd``, read past the page cache where the file system lets
    us: two files that share one inode number (sshfs) share one page cache too, which would show the old head."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT)
    except OSError:
        return os.pread(fd, size, 0)
    try:
        return os.pread(fd, size, 0)
    except OSError:
        pass  # O_DIRECT taken but this unaligned read refused (a block file system): its cache is right
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    return os.pread(fd, size, 0)


_AT_EMPTY_PATH = 0x1000
_AT_STATX_FORCE_SYNC = 0x2000
_STATX_SIZE = 0x200
_libc: ctypes.CDLL | None = None


def _force_attribute_sync(fd: int) -> None:
    """Ask the file system for ``fd``'s size now (statx with AT_STATX_FORCE_SYNC); nothing where libc lacks statx."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    statx = getattr(_libc, "statx", None)
    if statx is not None:
        statx(fd, b"", _AT_EMPTY_PATH | _AT_STATX_FORCE_SYNC, _STATX_SIZE, ctypes.create_string_buffer(256))


def _status_text(report: BootReport) -> str:
    clock = report.last_timestamp or "--"
    return f"[{clock}] {report.summary}"
