"""Logs whose lines run newest first, read oldest first again.

A log viewer's export or copy often lists the newest line at the top: Google Cloud Logging's console, Kibana and
Grafana's Loki sort that way by default (batch 52: an SGLang boot copied out of Cloud Logging, its traceback's
frames above the line that announces them). Read top to bottom, such a log shows a failure before the records that
led to it and each traceback upside down. Which way a log runs is learned from its own stamps: in a log written
oldest first, a line's stamp is almost never older than the one before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

from ckptprof.bootlog.parse import CHUNK_BYTES

# A line's first stamp, near its start (a collector's or the record's own): a date (year first, or vLLM's month-day)
# where there is one, and the time of day with its fraction. Digits only, bounded: nothing here is parsed as a
# number, the pieces are compared as text of one form.
_STAMP_RE = re.compile(
    rb"(?<![\d:.])((?:\d{4}-)?\d\d-\d\d[T ])?(\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(?![\d:])", re.ASCII
)
# Bytes from a line's start where its stamps may sit (after a collector's and a level word).
_STAMP_WITHIN = 120
_STAMPS_PER_LINE = 3
# Lines of the log's first block looked at: 400 found 242 of the 546 logs of 2026-12-06 turned, 200 found 231, in half
# the time (reports/cpu/2026-12-06m-bootlog-unseen).
SAMPLE_LINES = 200
# A log runs newest first when at least this many of its stamps are older than the stamp in the same place on the line
# above, and at most this share of the pairs that differ go the other way (a log written oldest first has none, but for
# clocks that disagree: a collector's and the server's, or a Ray cluster's nodes, in one file).
MIN_OLDER = 3
MAX_NEWER_SHARE = 0.25

NEWEST_FIRST_WARNING = "the log's lines run newest first (a log viewer's export or copy): it was read from its last line to its first"


def _stamp_keys(block: bytes, start: int, end: int) -> tuple[tuple[int, bytes], ...]:
    """The first stamps of the line of ``block`` from ``start`` to ``end`` (searched where it lies, not copied out),
    each as (its form, date, time and fraction): stamps of one form compare as their text.

    Each stamp is compared with the stamp in the same place on the line above: a collector that stamped every line
    alike (a paste re-wrapped with one time) says nothing, and the record's own stamp after it still does."""
    keys = []
    for match in _STAMP_RE.finditer(block, start, min(end, start + _STAMP_WITHIN)):
        date, time, fraction = match.groups()
        date = (date or b"")[:-1]
        # One form: the same kind of date and the same number of fraction digits, so that text order is time order.
        keys.append((len(date) * 16 + len(fraction or b""), date + b" " + time + b"." + (fraction or b"")))
        if len(keys) == _STAMPS_PER_LINE:
            break
    return tuple(keys)


def runs_newest_first(block: bytes, sample_lines: int = SAMPLE_LINES) -> bool:
    """Whether the lines at the start of ``block`` run newest first, by their stamps."""
    older = newer = 0
    previous: tuple[tuple[int, bytes], ...] = ()
    start = 0
    size = len(block)
    for _ in range(sample_lines):
        if start >= size:
            break
        end = block.find(b"\n", start)
        if end < 0:
            end = size
        keys = _stamp_keys(block, start, end)
        start = end + 1
        if not keys:
            continue
        for key, above in zip(keys, previous, strict=False):  # the stamps both lines hold
            if key[0] == above[0] and key[1] != above[1]:
                if key[1] < above[1]:
                    older += 1
                else:
                    newer += 1
        previous = keys
    return older >= MIN_OLDER and newer <= MAX_NEWER_SHARE * older


def reversed_lines(block: bytes) -> bytes:
    """``block``'s lines in the opposite order, each ending with its newline (a last line without one gets one)."""
    lines = block.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return b"".join(line + b"\n" for line in reversed(lines))


def reversed_blocks(spool: BinaryIO, size: int, chunk_bytes: int) -> Iterator[bytes]:
    """The lines of ``spool`` (``size`` bytes, oldest last) as blocks of whole lines, from its last line to its
    first, about ``chunk_bytes`` at a time: a long log is read backwards without being held whole."""
    pos = size
    head = b""  # the start of the first line of the piece read last: its beginning lies further back
    while pos > 0:
        start = max(0, pos - chunk_bytes)
        spool.seek(start)
        data = spool.read(pos - start) + head
        pos = start
        if pos > 0:
            cut = data.find(b"\n")
            if cut < 0:  # a line longer than a chunk: read further back first
                head = data
                continue
            head, data = data[: cut + 1], data[cut + 1 :]
        else:
            head = b""
        if data:
            yield reversed_lines(data)


class OldestFirst:
    """The blocks of a log (parse.iter_blocks'), oldest line first. A log whose first block runs newest first is
    spooled to a temporary file as it is read (memory stays bounded) and read back from its end; ``reversed`` says
    so once the first block has been looked at. ``on_read`` is told of each block as it is read from the log."""

    def __init__(
        self,
        blocks: Iterator[bytes],
        on_read: Callable[[bytes], object] | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self._blocks = blocks
        self._on_read = on_read
        self._chunk_bytes = chunk_bytes
        self.reversed = False

    def _read(self) -> Iterator[bytes]:
        for block in self._blocks:
            if self._on_read is not None:
                self._on_read(block)
            yield block

    def __iter__(self) -> Iterator[bytes]:
        blocks = self._read()
        first = next(blocks, None)
        if first is None:
            return
        if not runs_newest_first(first):
            yield first
            yield from blocks
            return
        self.reversed = True
        import tempfile  # here: only a newest-first log needs it, and its import costs every other read 10 ms

        with tempfile.TemporaryFile() as spool:
            spool.write(first)
            size = len(first)
            for block in blocks:
                spool.write(block)
                size += len(block)
            yield from reversed_blocks(spool, size, self._chunk_bytes)
