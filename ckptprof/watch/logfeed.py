"""The server's log as it is written, through the boot-log reader (ckptprof.bootlog, used as is): the child's
output when watch started the server, or a file (``--log``) followed from its first byte."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ckptprof.bootlog import BootLogAnalyzer, BootReport
from ckptprof.bootlog.parse import LineSplitter

POLL_S = 0.2


class LogFeed:
    """Thread-safe: the output readers feed it, the watcher asks for the report."""

    def __init__(self, source: str) -> None:
        self.source = source  # "the server's output" or the file's path
        self._analyzer = BootLogAnalyzer()
        self._splitter = LineSplitter()
        self._lock = threading.Lock()
        self.bytes = 0

    def feed(self, data: bytes) -> None:
        with self._lock:
            self.bytes += len(data)
            block = self._splitter.feed(data)
            if block:
                self._analyzer.feed_block(block)

    def report(self) -> BootReport:
        with self._lock:
            return self._analyzer.report()


class FileFollower:
    """Reads a growing log file into a LogFeed from a daemon thread until ``stop()``."""

    def __init__(self, path: Path, feed: LogFeed) -> None:
        self.path = path
        self.feed = feed
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ckptprof-watch-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._read_rest()

    def _run(self) -> None:
        try:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - held for the thread's life, closed in _read_rest
        except OSError as exc:
            self.error = f"--log {self.path}: cannot read it ({exc.strerror}); the log's phases are not shown"
            return
        while not self._stop.is_set():
            data = self._fh.read(1 << 20)
            if data:
                self.feed.feed(data)
            else:
                time.sleep(POLL_S)

    def _read_rest(self) -> None:
        fh = getattr(self, "_fh", None)
        if fh is None:
            return
        while data := fh.read(1 << 20):
            self.feed.feed(data)
        fh.close()
