"""Timestamps in boot logs: finding the one a line starts with (in bytes, scanning a block backwards or forwards),
and reading one as seconds or moving it by a duration, in the style it was written in.

SGLang writes ``2025-11-29 10:00:01[.123]`` (before 0.4, the time alone), vLLM ``11-29 10:00:01`` (no year).
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Callable
from functools import lru_cache

# How far back to look for a timestamped line when a bar frame (which has none) needs a time.
TIMESTAMP_LOOKBACK_LINES = 64
# Colour codes, any number of them. What follows them in a timestamp's line is never one, so none is given back
# (atomic, Python 3.11 on), and a line with none (most) is passed without a repeat's bookkeeping. The look back for a
# stamp tries this pattern at a line's start about 30,000 times in 16 MiB of the real corpus: the reader's
# instructions fell by 0.6% (reports/cpu/2026-12-06l-bootlog-speed; its time was within that VM's noise). Python 3.10
# has no atomic groups: the plain form there.
_COLOURS = (
    rb"(?>\x1b\[[0-9;]*m(?:\x1b\[[0-9;]*m)*+|)" if sys.version_info >= (3, 11) else rb"(?:\x1b\[[0-9;]*m)*"
)
# Finds the timestamp a line starts with, in bytes (used while scanning backwards through a block).
_LINE_TIMESTAMP_RE = re.compile(
    rb"[ \t]*"
    + _COLOURS
    + rb"(?:\[((?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)[ \]]"
    + rb"|(?:\([^()\n]{1,90}\)"
    + _COLOURS
    + rb" )?"
    + _COLOURS
    + rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    + _COLOURS
    + rb" (\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) )"
)
_TIMESTAMP_RE = re.compile(
    r"(?:(?:(\d{4})-)?(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?", re.ASCII
)
# vLLM prints no year; any leap year keeps 02-29 valid. Spans across New Year are not worth more.
_YEARLESS = 2000


def last_timestamp_before(
    block: bytes, end: int, max_lines: int | None = TIMESTAMP_LOOKBACK_LINES, floor: int = 0
) -> str | None:
    """The timestamp of the last record that starts a line before offset ``end``, looking back ``max_lines``
    lines (None: all of them) and never before offset ``floor``."""
    stop = end
    lines = 0
    while max_lines is None or lines < max_lines:
        lines += 1
        if stop <= floor:
            return None
        start = block.rfind(b"\n", 0, stop - 1) + 1
        match = _LINE_TIMESTAMP_RE.match(block, start)
        if match is not None:
            raw = match.group(1) or match.group(2)
            return raw.decode("ascii") if raw else None
        stop = start
    return None


def last_timestamp_of_form(
    block: bytes,
    end: int,
    form: Callable[[str], bool],
    floor: int = 0,
    max_lines: int = TIMESTAMP_LOOKBACK_LINES,
) -> str | None:
    """``last_timestamp_before``, passing over the stamps that ``form`` rejects (another logger's) to the newest
    one it accepts."""
    stop = end
    for _ in range(max_lines):
        if stop <= floor:
            return None
        start = block.rfind(b"\n", 0, stop - 1) + 1
        match = _LINE_TIMESTAMP_RE.match(block, start)
        if match is not None:
            raw = match.group(1) or match.group(2)
            if raw and form(stamp := raw.decode("ascii")):
                return stamp
        stop = start
    return None


def first_timestamp(block: bytes, max_lines: int = TIMESTAMP_LOOKBACK_LINES) -> str | None:
    """The timestamp of the first record near the start of ``block``."""
    found = first_timestamp_line(block, max_lines)
    return found[0] if found is not None else None


# A record that another process wrote right after a tqdm frame, on the frame's line (tqdm ends a frame with no
# newline): "...| 8/28 [00:14<00:25,  1.30s/it][2025-05-16 10:48:21 TP1] Scheduler hit an exception".
_GLUED_TIMESTAMP_RE = re.compile(rb"[\]\r]" + _LINE_TIMESTAMP_RE.pattern)


def first_timestamp_line(block: bytes, max_lines: int = TIMESTAMP_LOOKBACK_LINES) -> tuple[str, int] | None:
    """``first_timestamp``, with where its line starts in ``block``. A record glued to a bar frame on the line
    counts: passing over it would take the stamp of a later line (another server's, in a file of several)."""
    start = 0
    for _ in range(max_lines):
        newline = block.find(b"\n", start)
        end = newline if newline >= 0 else len(block)
        match = _LINE_TIMESTAMP_RE.match(block, start)
        if match is None and block.find(b"%", start, end) >= 0:
            match = _GLUED_TIMESTAMP_RE.search(block, start, end)
        if match is not None:
            raw = match.group(1) or match.group(2)
            return (raw.decode("ascii"), start) if raw else None
        if newline < 0:
            return None
        start = newline + 1
    return None


_EPOCH = dt.datetime(1970, 1, 1)


# Kept for the stamps a log repeats near each other (ranks print one stamp each, a bar's lines look back to it), and
# no more: 8,192 remembered every stamp of the real corpus (2,922), so that the benchmark's file, which repeats the
# corpus, read its later copies' stamps for free (tests/unit/test_bootlog_corpus_repeats.py).
@lru_cache(maxsize=1024)
def timestamp_seconds(timestamp: str) -> float | None:
    """Seconds since an arbitrary origin for a log timestamp ('2025-11-29 10:00:01[.123]' or vLLM's
    '11-29 10:00:01'); None when it is not a valid time."""
    match = _TIMESTAMP_RE.fullmatch(timestamp)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        moment = dt.datetime(
            int(year) if year else _YEARLESS,
            int(month) if month else 1,  # a time without a date (SGLang before 0.4)
            int(day) if day else 1,
            int(hour),
            int(minute),
            int(second),
        )
    except ValueError:
        return None
    return (moment - _EPOCH).total_seconds() + (float(f"0.{fraction}") if fraction else 0.0)


def stamp_before(stamp: str | None, than: str | None) -> bool:
    """Whether ``stamp`` is a time before ``than`` (False when either is missing or cannot be read)."""
    if stamp is None or than is None:
        return False
    seconds, other = timestamp_seconds(stamp), timestamp_seconds(than)
    return seconds is not None and other is not None and seconds < other


def shift_timestamp(timestamp: str, delta_s: float) -> str:
    """``timestamp`` moved by ``delta_s`` seconds, written in the same style (year and fraction or not)."""
    base = timestamp_seconds(timestamp)
    match = _TIMESTAMP_RE.fullmatch(timestamp)
    if base is None or match is None:
        return timestamp
    try:
        moment = _EPOCH + dt.timedelta(seconds=base + delta_s)
    except (OverflowError, ValueError):
        return timestamp
    text = moment.strftime(
        "%Y-%m-%d %H:%M:%S" if match.group(1) else "%m-%d %H:%M:%S" if match.group(2) else "%H:%M:%S"
    )
    fraction = match.group(7)
    if fraction:
        text += timestamp[match.start(7) - 1] + f"{moment.microsecond:06d}"[: len(fraction)]
    return text
