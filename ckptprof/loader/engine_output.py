"""What an engine writes while a rank drives it: captured at the file descriptors, kept, never printed over ours.

A real engine's import and iterators write to the process's stdout and stderr: torch's deprecation lines from C++,
``Failed to import from vllm._C``, its loggers and warnings. A rank's descriptors 1 and 2 are the terminal the
user reads ckptprof's progress on, so while the engine runs they point at a temporary file instead; the text is
kept in the rank's result (``RankResult.engine_output``, in the session's JSON); a failed rank's error carries a
one-line summary of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

# A session keeps at most this much of what an engine wrote per rank: its head and its tail.
KEEP_BYTES = 64 * 1024
# By the level a logger printed, else by what a Python warning or exception looks like.
_WARNING = re.compile(r"^\s*(WARNING|W\d{4} )|Warning:|warnings\.warn|deprecated")
_ERROR = re.compile(
    r"^\s*(ERROR|CRITICAL|E\d{4} |F\d{4} )|Traceback \(most recent call last\)|\w(Error|Exception): "
)


@dataclass
class Captured:
    """Filled in when the capture ends."""

    text: str = ""
    total_bytes: int = 0


@contextlib.contextmanager
def capture() -> Iterator[Captured]:
    """Point descriptors 1 and 2 at a temporary file for the block (the engine's Python and C++ writes alike)."""
    out = Captured()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        # Python's own streams too: where sys.stdout / sys.stderr were replaced (a test's capture), they are not fds 1/2.
        text = open(sink.fileno(), "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                yield out
        finally:
            text.close()  # flushes; the sink itself stays open (closefd=False)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            out.total_bytes = sink.seek(0, os.SEEK_END)
            out.text = _kept(sink, out.total_bytes)


def _kept(sink: IO[bytes], size: int) -> str:
    """All of it up to KEEP_BYTES, else its head and its tail."""
    sink.seek(0)
    if size <= KEEP_BYTES:
        data = sink.read()
        return data.decode("utf-8", "replace")
    head = sink.read(KEEP_BYTES // 2).decode("utf-8", "replace")
    sink.seek(size - KEEP_BYTES // 2)
    tail = sink.read().decode("utf-8", "replace")
    return f"{head}\n[... {size - KEEP_BYTES} bytes not kept ...]\n{tail}"


@dataclass(frozen=True)
class Summary:
    lines: int
    warnings: int
    errors: int
    first_error: str | None

    def sentence(self, engine: str) -> str:
        parts = [f"{self.lines} line{'s' if self.lines != 1 else ''}"]
        if self.warnings:
            parts.append(f"{self.warnings} warning{'s' if self.warnings != 1 else ''}")
        if self.errors:
            parts.append(f"{self.errors} error line{'s' if self.errors != 1 else ''}")
        text = f"{engine} wrote {', '.join(parts)} while it loaded"
        if self.first_error:
            text += f" (first error: {self.first_error[:160]})"
        return text


def summarise(text: str) -> Summary:
    """How many lines an engine wrote, how many of them warn, how many report an error (and the first)."""
    lines = [line for line in text.splitlines() if line.strip()]
    warnings = [line for line in lines if _WARNING.search(line)]
    errors = [line.strip() for line in lines if _ERROR.search(line) and not _WARNING.search(line)]
    return Summary(
        lines=len(lines),
        warnings=len(warnings),
        errors=len(errors),
        first_error=errors[0] if errors else None,
    )
