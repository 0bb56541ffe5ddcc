"""Which lines of a block can matter, found without reading every line: most of a log is text no table knows.

A line matters when it holds a needle: one of an engine rule's words, a failure word, a traceback frame's
``File "``, or a bar's ``%``. The reader jumps from needle to needle and reads only those lines; every other line
moves the log's clock at most.
"""

from __future__ import annotations

import re

from ckptprof.bootlog.failures import FAILURE_NEEDLES, FRAME_NEEDLE, HELPER_FRAMES, IPYTHON_FRAME_NEEDLES
from ckptprof.bootlog.parse import needle_pattern
from ckptprof.bootlog.reading import ENGINES
from ckptprof.engines.log_rules import Ready

# The needles of the records that matter only until the boot is ready (Ready.until_ready): SGLang's decode statistics,
# which say it serves, and its warm-up's lines, which say it is not ready yet. A busy server writes them for hours (a
# decode line every 40 steps on every rank, a prefill line for every batch): the candidate search leaves them out, and
# the reader looks for the next one by itself only while the boot is not ready (BootLogAnalyzer.feed_block). Found by
# the search, they made such a log read two to six times slower. vLLM's throughput lines stay in the search: read,
# they move the log's clock in the engine's own stamp form, which a look back over skipped lines cannot tell from a
# foreign logger's (an LMCache line's dated stamp, batch 56).
UNTIL_READY_NEEDLES = tuple(
    dict.fromkeys(
        rule.needle.encode()
        for engine in ENGINES
        for rule in engine.records
        if isinstance(rule.action, Ready) and rule.action.until_ready
    )
)


def _needles() -> tuple[str, ...]:
    records = [
        rule.needle
        for engine in ENGINES
        for rule in engine.records
        if not (isinstance(rule.action, Ready) and rule.action.until_ready)  # looked for on their own
    ]
    return (*dict.fromkeys(records), *FAILURE_NEEDLES, FRAME_NEEDLE, *IPYTHON_FRAME_NEEDLES, "%")


# Needles that start with a capital, a digit or punctuation are found by one search (next_candidate, below); those that
# start with a small letter are looked for one by one. Small letters are most of a log's text, so the search would
# otherwise try a branch at almost every byte: split this way the pre-filter ran twice as fast. REGULAR_RE finds the
# former, "%" among them, in the rest of a line.
# The regular needles but a bar's "%", which the reader finds on its own.
_WORDS = tuple(needle for needle in _needles() if not needle[0].islower() and needle != "%")
REGULAR_RE = needle_pattern((*_WORDS, "%"))
# ...except the small-letter needles that hold a letter a log's text rarely has: the search finds those at that
# letter and looks behind it for the rest, at about no cost, where each scan of its own cost 9-11 ms a 16 MiB of the
# real corpus. No regular needle starts with such a letter, so a match that starts with one is an anchored needle's
# (ANCHOR_BYTES). Measured on that corpus: "failed" (at "f") or "non-default args" (at "-") cost the search more than
# their scan.
_ANCHORED_AT = {"on V1 engine": 3, "rocBLAS error": 3, "sigquit": 3, "world_size=": 8, "world size": 8}
_LOWER = tuple(needle for needle in _needles() if needle[0].islower())
if not set(_ANCHORED_AT) <= set(_LOWER):  # pragma: no cover - a table renamed a needle: anchor its new words
    raise ValueError(f"anchored needles no table has: {sorted(set(_ANCHORED_AT) - set(_LOWER))}")
ANCHOR_BYTES = frozenset(needle[at].encode()[0] for needle, at in _ANCHORED_AT.items())
if any(needle.encode()[0] in ANCHOR_BYTES for needle in _needles()):  # pragma: no cover - see ANCHOR_BYTES
    raise ValueError("a regular needle starts with an anchored needle's letter")
# The candidate search reads a view of the block (``candidate_view``) in which every byte that a regular needle starts
# with, and every anchored needle's anchor, reads as NUL (a NUL as \x01): its pattern then opens with one literal byte,
# which the regex engine finds with a plain byte loop. A pattern that opens with a class of bytes has every byte of
# the block tested against the class: on 16 MiB of the real corpus (VM, Python 3.11) that loop alone took 75 ms of the
# search's 110, where the literal's takes 5 and bytes.translate 11. The anchored needles look behind only once their
# rest has matched: a look-behind tried first would run at every NUL. A bar's ``%`` is no part of the view's pattern
# (one byte would make every NUL a match): its lines are found by bytes.find.
_VIEW_MAPPED = sorted({needle[0] for needle in _WORDS} | {needle[at] for needle, at in _ANCHORED_AT.items()})
_TO_VIEW = {ord(char): "\x00" for char in _VIEW_MAPPED} | {0: "\x01"}
VIEW_TABLE = bytes.maketrans("".join(_VIEW_MAPPED).encode() + b"\x00", b"\x00" * len(_VIEW_MAPPED) + b"\x01")
# The view's pattern: the NUL, then one alternation of every needle's rest (the anchored needles' after their anchor).
CANDIDATE_VIEW_RE = re.compile(
    b"\x00"
    + needle_pattern(
        (needle.translate(_TO_VIEW)[1:] for needle in _WORDS),
        anchored=tuple((needle.translate(_TO_VIEW), at + 1) for needle, at in _ANCHORED_AT.items()),
    ).pattern
)
# What the view's match is in the block: a regular needle itself, or else whatever the needles' own pattern finds there.
WORD_BYTES = frozenset(needle.encode() for needle in _WORDS)
CANDIDATE_WORDS_RE = needle_pattern(_WORDS, anchored=tuple(_ANCHORED_AT.items()))


def candidate_view(block: bytes) -> bytes:
    """The view of ``block`` that ``next_candidate`` searches (as long as the block: offsets are the block's)."""
    return block.translate(VIEW_TABLE)


def next_candidate(view: bytes, block: bytes, pos: int) -> tuple[int, int] | None:
    """Where the first needle other than ``%`` at or after ``pos`` lies in ``block`` (``view`` is its
    candidate_view): what ``CANDIDATE_WORDS_RE.search(block, pos).span()`` gives."""
    search = CANDIDATE_VIEW_RE.search
    while (match := search(view, pos)) is not None:
        start, end = match.span()
        if block[start:end] in WORD_BYTES:
            return start, end
        # The view cannot tell the needle's first byte from another that reads as NUL ("CPU blocks" for "GPU
        # blocks"), nor an anchored needle's words before its anchor: the block says.
        exact = CANDIDATE_WORDS_RE.match(block, start)
        if exact is not None:
            return exact.span()
        pos = start + 1
    return None


_RARE_NEEDLES = tuple(needle.encode() for needle in _LOWER if needle not in _ANCHORED_AT)
# Each is looked for on its own: the short ones by a compiled literal, which the regex engine finds faster than
# bytes.find does (on 16 MiB of the real corpus: "failed" 5.8 against 10.6 ms, "blocks: " 5.8 against 8.6), the long
# ones by bytes.find, which skips further along a block ("non-default args" 5.3 against 9.6 ms).
_SHORT_NEEDLE_BYTES = 8
_RARE_SEARCHES = tuple(
    re.compile(re.escape(needle)).finditer if len(needle) <= _SHORT_NEEDLE_BYTES else needle
    for needle in _RARE_NEEDLES
)
FRAME_BYTES = FRAME_NEEDLE.encode()
# The traceback frames some engine's table says something about (a phase, a model or a step), and those of
# Python's helper processes.
FRAME_RULES_RE = needle_pattern(
    (
        *(
            frame.needle
            for engine in ENGINES
            for frame in engine.frames
            if frame.phase is not None or frame.model is not None or frame.step is not None
        ),
        *HELPER_FRAMES,
    )
)
# An engine frame that says nothing about the phase is read only while it can still tell which engine ran or that
# a traceback began above the excerpt: once both are known, most of a long traceback's lines are passed over.
ENGINE_FRAME_RE = needle_pattern(path for engine in ENGINES for path in engine.module_paths)


def rare_line_starts(block: bytes) -> list[int]:
    """Where the lines holding a rare needle start, last first: BootLogAnalyzer.feed_block pops them in order, taking
    whichever comes first of these, the next needle's line (next_candidate) and the next "%"'s."""
    starts: set[int] = set()
    for search in _RARE_SEARCHES:
        if isinstance(search, bytes):
            at = block.find(search)
            while at >= 0:
                starts.add(block.rfind(b"\n", 0, at) + 1)
                at = block.find(search, at + len(search))
        else:
            for match in search(block):
                starts.add(block.rfind(b"\n", 0, match.start()) + 1)
    return sorted(starts, reverse=True)


def next_until_ready_line(block: bytes, pos: int, ahead: list[int]) -> int:
    """Where the first line at or after ``pos`` that holds an until-ready needle starts; ``len(block)`` when none
    does. ``ahead`` holds, per needle, where it was last found in this block (``len(block)``: nowhere further; below
    ``pos``: look again), so that each needle's search moves through the block once: searched afresh from every
    line, a needle the block lacks was looked for to the block's end each time (a serving log with no ready line
    read at 0.4 MB/s)."""
    size = len(block)
    first = size
    for index, needle in enumerate(UNTIL_READY_NEEDLES):
        at = ahead[index]
        if at < pos:
            at = block.find(needle, pos)
            ahead[index] = at = size if at < 0 else at
        if at < first:
            first = at
    return first if first == size else max(pos, block.rfind(b"\n", 0, first) + 1)


def until_ready_ahead() -> list[int]:
    """A fresh ``ahead`` for next_until_ready_line: every needle still to be looked for."""
    return [-1] * len(UNTIL_READY_NEEDLES)
