"""Which ckptprof runs are in progress on this host, and which were while something was measured.

Two runs at once spoil each other's figures: four runs probing together measured storage 42% and the page cache
43% below what one run alone measures, and a cold run's cache drop evicts the pages a warm run had just read.
Each ``run`` (and ``probe``) therefore registers itself in the cache directory for as long as it lasts: one JSON
file per run, held under an exclusive ``flock``. The lock, not the pid, says whether the run is still going - the
kernel releases it when the process ends, however it ends, so a crashed run never counts as running and a reused
pid never makes a dead run look alive. A run that ends writes its end time and keeps the file for an hour, so a
run that started and ended inside another's probe is still seen by it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptprof.cachedir import cache_dir

KEEP_ENDED_S = 3600.0
_registered: dict[int, Path] = {}  # this process's own entry (pid -> file): one per process, re-entrant
_held: dict[Path, int] = {}  # its locked descriptor


@dataclass(frozen=True)
class RunEntry:
    pid: int
    what: str  # "run" or "probe"
    started_unix: float
    ended_unix: float | None  # None while it runs (or when it died without saying)
    live: bool
    files: tuple[str, ...]  # the checkpoint files it reads
    cache: str | None  # its cache mode (cold runs drop pages)

    def describe(self) -> str:
        """'pid 1234 (run, cold, since 14:02:11)'."""
        since = time.strftime("%H:%M:%S", time.localtime(self.started_unix))
        state = f"since {since}" if self.live else f"{since} to {_clock(self.ended_unix)}"
        mode = f", {self.cache}" if self.cache else ""
        return f"pid {self.pid} ({self.what}{mode}, {state})"


def _clock(unix: float | None) -> str:
    return "?" if unix is None else time.strftime("%H:%M:%S", time.localtime(unix))


def runs_dir(base: Path | None = None) -> Path:
    return (base or cache_dir()) / "runs"


@contextlib.contextmanager
def registered(
    what: str, files: Sequence[str | Path] = (), cache: str | None = None, base: Path | None = None
) -> Iterator[None]:
    """Be listed as a run in progress while the block runs. Nested calls in one process keep the first entry.
    A cache directory that cannot be written only costs the listing: the run goes on."""
    pid = os.getpid()
    if pid in _registered:
        yield
        return
    path = _enter(what, files, cache, base)
    try:
        yield
    finally:
        if path is not None:
            _leave(path)


def _enter(what: str, files: Sequence[str | Path], cache: str | None, base: Path | None) -> Path | None:
    pid = os.getpid()
    folder = runs_dir(base)
    path = folder / f"{pid}-{secrets.token_hex(4)}.json"
    doc = {
        "pid": pid,
        "what": what,
        "started_unix": time.time(),
        "ended_unix": None,
        "files": [os.path.realpath(os.fspath(f)) for f in files],
        "cache": cache,
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps(doc).encode())
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    _registered[pid] = path
    _held[path] = fd
    return path


def _leave(path: Path) -> None:
    _registered.pop(os.getpid(), None)
    fd = _held.pop(path, None)
    if fd is None:
        return
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["ended_unix"] = time.time()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(doc).encode(), 0)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)  # releases the lock: the run is over


def others(since: float | None = None, base: Path | None = None) -> list[RunEntry]:
    """Other processes' runs in progress now, and (with ``since``) those that ended at or after ``since``.
    Entries ended long ago are removed on the way."""
    folder = runs_dir(base)
    try:
        names = sorted(folder.glob("*.json"))
    except OSError:
        return []
    now = time.time()
    found: list[RunEntry] = []
    for path in names:
        entry = _read(path)
        if entry is None or entry.pid == os.getpid():
            continue
        if not entry.live:
            ended = entry.ended_unix if entry.ended_unix is not None else _mtime(path)
            if now - ended > KEEP_ENDED_S:
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if since is None or ended < since:
                continue
        found.append(entry)
    return found


def _read(path: Path) -> RunEntry | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            live = False
        except BlockingIOError:
            live = True  # its owner holds the lock: it is running
        except OSError:
            return None
        raw = os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
        return RunEntry(
            pid=int(doc["pid"]),
            what=str(doc.get("what", "run")),
            started_unix=float(doc["started_unix"]),
            ended_unix=None if doc.get("ended_unix") is None else float(doc["ended_unix"]),
            live=live,
            files=tuple(str(f) for f in doc.get("files") or ()),
            cache=None if doc.get("cache") is None else str(doc["cache"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def words(entries: Sequence[RunEntry]) -> str:
    """'2 other ckptprof runs (pid 1234 (run, cold, since 14:02:11), ...)'."""
    count = len(entries)
    listed = ", ".join(e.describe() for e in entries[:4]) + (", ..." if count > 4 else "")
    return f"{count} other ckptprof run{'s' if count != 1 else ''} ({listed})"
