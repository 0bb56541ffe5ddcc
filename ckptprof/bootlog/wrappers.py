"""Prefixes that log collectors put in front of every line a server wrote, removed before anything else.

A server's log rarely reaches a user as the server wrote it: ``kubectl logs --timestamps`` and GitHub Actions
put an RFC 3339 time in front of each line, ``docker compose`` the service name and a bar, journald the date,
host and unit. None of them is a rank or a boot record. They are stripped from a whole block in one C-level
substitution, so that every later stage sees the server's own text, and a tqdm frame starts its line again.

Each entry is one wrapper seen in a real log; adding a collector is adding one pattern here.
"""

from __future__ import annotations

import re
import sys

# Every pattern matches at the start of a line only and must never match the start of a record that SGLang or
# vLLM writes itself ("[2025-01-01 10:00:00 TP0] ...", "INFO 01-01 ...", "(VllmWorker rank=0 pid=1) ...").
WRAPPER_PATTERNS: tuple[tuple[str, bytes], ...] = (
    # The first that matches wins: the more specific ones come first.
    # TorchServe re-logging a model process: 2024-09-13T22:25:38,258 [INFO ] W-9000-model_1.0-stdout MODEL_LOG -
    (
        "torchserve",
        rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3} \[[A-Z]{3,8} ?\] [\w.-]{1,120} MODEL_LOG -(?: |(?=[\r\n]))",
    ),
    # kubectl logs --timestamps, GitHub Actions, Loki exports: 2025-12-18T08:24:02.123456789Z
    ("rfc3339", rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? "),
    # a pod log viewer: [2025-12-18T16:24:02+08:00] pod-name >>
    (
        "bracketed-rfc3339",
        rb"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\] (?:[^\s>]{1,120} >> ?)?",
    ),
    # An application re-logging the server's output through Python's logging, in its common
    # "%(asctime)s - %(name)s - %(levelname)s - %(message)s" form (olmOCR around SGLang):
    # 2025-04-03 12:06:13,365 - __main__ - INFO - ...
    (
        "python-logging",
        rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.<>-]{1,120} - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) -"
        rb"(?: |(?=[\r\n]))",
    ),
    # A log viewer's copy: the entry's severity and its time, as Google Cloud Logging's console shows them ("ERROR
    # 2025-04-05T00:01:19.198923587Z [2025-04-05 00:01:19 TP1] Scheduler hit an exception", sglang#5096). Any word of
    # 4 to 9 capitals (its severities run from INFO to EMERGENCY; other viewers write WARN): one class tried at each line
    # start, where the nine words were nine branches (0.2% of the reader's instructions). A year-first date with a
    # "T": never vLLM's own "ERROR 04-05 00:01:19".
    (
        "severity-rfc3339",
        rb"[A-Z]{4,9} "
        rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d) ",
    ),
    # docker compose: sglang-1  | ...
    ("compose", rb"[A-Za-z0-9][\w.-]{0,80}-\d{1,4} {1,40}\| ?"),
    # a container log viewer's export, its local time to the millisecond and a bar (99sono/DockerBuildFiles' dumps of
    # vLLM under WSL): 2026-05-01 18:45:09.424 | ...
    ("dated-bar", rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \| "),
    # journald: Dec 18 16:24:02 host python3[1234]:
    ("journald", rb"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,80} [\w./@-]{1,80}\[\d{1,10}\]: "),
)

_ALTERNATIVES_IN_ORDER = b"|".join(b"(?:" + pattern + b")" for _, pattern in WRAPPER_PATTERNS)
# The same alternatives with those that start with a digit behind one test for it: a line that starts with no digit
# (most of a block's) is then tried against four patterns fewer (the substitution over the real corpus about a third
# faster). Only docker compose's can start with a digit among the others, and it never matches a line that a
# digit-first collector's does (its "-N |" follows one word, their dates a space), so which comes first among them
# changes nothing; test_bootlog_wrappers compares the two on every collector. The test is the digit itself, which
# the regex engine checks as it enters the alternatives, not a look-ahead, which it sets up at every line.
_DIGIT_FIRST = tuple(pattern for _, pattern in WRAPPER_PATTERNS if pattern.startswith(rb"\d"))
if not all(
    pattern.startswith(rb"\d{4}") for pattern in _DIGIT_FIRST
):  # pragma: no cover - a new collector's form
    raise ValueError("a collector's pattern that starts with a digit must start with a year (\\d{4})")
_ALTERNATIVES = b"|".join(
    (
        rb"\d(?:"
        + b"|".join(b"(?:\\d{3}" + pattern[len(rb"\d{4}") :] + b")" for pattern in _DIGIT_FIRST)
        + b")",
        *(b"(?:" + pattern + b")" for _, pattern in WRAPPER_PATTERNS if pattern not in _DIGIT_FIRST),
    )
)
# Collectors can nest (journald around a compose log), so up to two are removed from one line: the alternatives
# written twice, the second optional, which the regex engine runs without a repeat's bookkeeping. The patterns
# start with the line break before the line, not with (?m)^: a literal first byte lets the regex engine jump
# from line to line instead of testing every position (3.5 times faster). Bars redrawn in place carry the
# wrapper after each carriage return when the collector saw the frames as lines.
# A paste may indent or colour the collector's line too: that goes with the prefix, as blanks, then colour codes
# and blanks only where a colour code follows them (most lines have none: the repeat of both is not set up).
# Possessive (``*+``, atomic ``(?>``; Python 3.11 on) where it exists: no wrapper starts with a blank or an escape,
# so giving any of it back never lets one match, and not keeping that backtracking state makes the attempt at every
# line start cheaper (the sub over a 1 MB block of the real corpus about 17% faster; with the three changes above,
# 16 MiB of it 18% faster again).
_NEW_RE = sys.version_info >= (3, 11)
_POSSESSIVE = b"+" if _NEW_RE else b""
_ESCAPE = rb"\x1b\[[0-9;]*m"
_LEAD = (
    rb"[ \t]*"
    + _POSSESSIVE
    + (b"(?>" if _NEW_RE else b"(?:")
    + _ESCAPE
    + rb"(?:[ \t]|"
    + _ESCAPE
    + b")*"
    + _POSSESSIVE
    + b"|)"
)
_WRAPPERS = rb"(?:" + _ALTERNATIVES + rb")(?:" + _ALTERNATIVES + rb")?"
_WRAPPER_RE = re.compile(rb"\n" + _LEAD + _WRAPPERS)
_WRAPPER_AFTER_CR_RE = re.compile(rb"\r" + _LEAD + _WRAPPERS)


# A notebook's output pane (Jupyter) turns path-like words into Markdown links to its own server: a bar's count
# "1/5" reaches the paste as "1[/5](http://host:8888/5)". The link's text is what the server wrote.
_LINK_MARK = b"](http"
# Found by a compiled literal: the regex engine finds this one in half the time bytes.find takes (4.3 against 8.4 ms on
# 16 MiB of the real corpus, which holds it 30 times).
_LINK_MARK_RE = re.compile(re.escape(_LINK_MARK))
_LINK_RE = re.compile(rb"\[([^\[\]\n]{1,200})\]\(https?://[^()\s]{1,500}\)")


def unlink(block: bytes) -> bytes:
    """``block`` with each Markdown link to a web address replaced by its text; the same object when it has none."""
    mark = _LINK_MARK_RE.search(block)
    if mark is None:
        return block
    at = mark.start()
    # A link never spans lines, and each holds the mark: only the lines that hold one are read (a block of a
    # server's log holds thousands of "[", each of which the pattern would otherwise try).
    pieces: list[bytes] = []
    done = 0
    while at >= 0:
        start = block.rfind(b"\n", 0, at) + 1
        end = block.find(b"\n", at)
        end = len(block) if end < 0 else end
        pieces.append(block[done:start])
        pieces.append(_LINK_RE.sub(rb"\1", block[start:end]))
        done = end
        mark = _LINK_MARK_RE.search(block, end)
        at = -1 if mark is None else mark.start()
    pieces.append(block[done:])
    return b"".join(pieces)


# A terminal that wraps long lines at its width (a paste out of a narrow window, a notebook): the rest of a line goes
# on the next one, cut mid-word, with none of the record's prefix ("... in _initialize_k" / "v_caches"). Learned from
# the block's own lines: at least two different lines of one and the same length, each no shorter than the line
# before it and its rest, and followed by a rest that starts in the middle of a word (a small letter or "_", after
# colour codes at most). A wrapped frame's function name and a wrapped error line are then read whole.
# The look-ahead first: most lines start with neither a small letter nor a colour code, and a test of one byte
# turns them away before the colour codes' repeat is set up (the pass over 16 MiB of the real corpus about a fifth
# faster).
_WRAP_NEXT_RE = re.compile(rb"\n(?=[a-z_\x1b])((?:\x1b\[[0-9;]*m)*)[a-z_]")
# What a decorated wrapped line ends with after its last character: colour codes, a CR of CRLF line ends.
_WRAP_TAIL_RE = re.compile(rb"(?:\x1b\[[0-9;]*m|\r)*\Z")
_TAIL_LAST_BYTES = frozenset(b"m\r")
_WRAP_MIN_WIDTH = 60
_WRAP_MIN_LINES = 2


def _width_before(block: bytes, start: int) -> int:
    """The length of the line before the one that starts at ``start`` (0 when there is none)."""
    if start <= 0:
        return 0
    return start - 1 - (block.rfind(b"\n", 0, start - 1) + 1)


def _width_after(block: bytes, newline: int) -> int:
    """The length of the line after the newline at ``newline``."""
    end = block.find(b"\n", newline + 1)
    return (len(block) if end < 0 else end) - newline - 1


def rejoin_wrapped(block: bytes) -> bytes:
    """``block`` with the lines a terminal wrapped at its width joined again; the same object when none was."""
    ends: dict[int, list[tuple[int, int]]] = {}  # a line's length -> (where it ends, where its rest starts)
    rfind = block.rfind
    for match in _WRAP_NEXT_RE.finditer(block):
        end = match.start()
        start = rfind(b"\n", 0, end) + 1
        width = end - start
        # No longer than the wrapped line: the line before it and its rest after it (the terminal's width).
        if width < _WRAP_MIN_WIDTH or width < _width_before(block, start) or width < _width_after(block, end):
            continue
        # A decoration can only end in a colour code's "m" or a CR: most lines are looked at no further.
        tail = _WRAP_TAIL_RE.search(block, start, end) if block[end - 1] in _TAIL_LAST_BYTES else None
        ends.setdefault(width, []).append((tail.start() if tail else end, match.end(1)))
    wrapped = [
        (width, cuts)
        for width, cuts in ends.items()
        if len({block[block.rfind(b"\n", 0, end) + 1 : end] for end, _ in cuts}) >= _WRAP_MIN_LINES
    ]
    if not wrapped:
        return block
    width, cuts = max(wrapped)
    pieces, at = [], 0
    for end, rest in cuts:
        pieces.append(block[at:end])
        at = rest
    pieces.append(block[at:])
    return b"".join(pieces)


def unwrap(block: bytes) -> bytes:
    """``block`` without collector prefixes, a pane's frame, a paste's indentation or a notebook's links; the same
    object when it has none (the common, free case)."""
    return unwrap_paste(block)[0]


def unwrap_paste(block: bytes, indent: bytes | None = None) -> tuple[bytes, bytes | None]:
    """``unwrap``, for one block of a log whose earlier blocks shared the indentation ``indent`` (a block of a single
    line, such as the cut last line of a paste, cannot show it alone); also the indentation this block shared."""
    # The paste's indentation first: a pane's frame inside a quoted block is then at the lines' start.
    indent = learn_indent(block, indent)
    if indent is not None:
        block = re.sub(rb"(?m)^" + re.escape(indent), b"", block)
    # A frame inside a frame (a quoted paste copied out of a pane) comes off too. unframe reads only the block, so
    # a block it left as it was would be left again: the second look is spared (a scan of every line start).
    once = unframe(block)
    block = unlink(once if once is block else unframe(once))
    framed = b"\n" + block
    # One substitution that counts, not a search first: that was a second scan of every line start of a block
    # with a wrapper in it.
    framed, wrappers = _WRAPPER_RE.subn(b"\n", framed)
    if not wrappers:
        return rejoin_wrapped(unname(block)), indent
    if b"\r" in framed:
        framed = _WRAPPER_AFTER_CR_RE.sub(b"\r", framed)
    # A collector's prefix before a quoted paste's frame: the frame shows only now. A container's name last: it
    # stands inside the other collectors' prefixes and the paste's quote.
    return rejoin_wrapped(unname(unframe(framed[1:]))), indent


# docker compose names a container it did not number (`container_name:` in the compose file) as it is, padded to the
# longest name and a bar: "deepseek-v32-exp  | ". With no number after the name, the form alone would take any word
# and a bar for a collector's; a name most of the block's first lines open with, the same each time, is one.
_NAMED_PREFIX_RE = re.compile(rb"(?:\x1b\[[0-9;]*m)*([A-Za-z0-9][\w.-]{0,80} {1,40}\|)(?: |(?=\r?$))")
_NAME_SAMPLE_LINES = 40
_NAME_SHARE = 0.6
_NAME_MIN_LINES = 3


def learn_name_prefix(block: bytes) -> bytes | None:
    """The container name and bar most of the block's first lines open with (``_NAMED_PREFIX_RE``), or that its first
    lines all open with (a container's log pasted before another server's), or None."""
    counts: dict[bytes, int] = {}
    leading: bytes | None = None  # the name every line so far opened with
    run = 0
    seen = 0
    start = 0
    size = len(block)
    for _ in range(2 * _NAME_SAMPLE_LINES):
        if seen >= _NAME_SAMPLE_LINES or start >= size:
            break
        end = block.find(b"\n", start)
        if end < 0:
            end = size
        line = block[start:end]
        start = end + 1
        if not line.strip():
            continue
        seen += 1
        match = _NAMED_PREFIX_RE.match(line)
        name = match.group(1) if match is not None else None
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
        if run == seen - 1 and name is not None and (leading is None or name == leading):
            leading, run = name, run + 1
    if run >= _NAME_MIN_LINES:
        return leading
    if not counts:
        return None
    name, count = max(counts.items(), key=lambda item: item[1])
    return name if count >= _NAME_MIN_LINES and count >= _NAME_SHARE * seen else None


def unname(block: bytes) -> bytes:
    """``block`` without the container name and bar its lines open with (``learn_name_prefix``); the same object when
    it has none."""
    if b"|" not in block:
        return block
    name = learn_name_prefix(block)
    if name is None:
        return block
    return re.sub(rb"(?m)^((?:\x1b\[[0-9;]*m)*)" + re.escape(name) + rb" ?", rb"\1", block)


# A pane or box a log was copied out of (k9s, tmux borders, a quoted block): the same symbol and a space open
# most lines, and the same symbol, after the pane's padding, closes them. Learned from the block's own lines
# rather than listed viewer by viewer; a record never starts with a lone symbol and a space, so none is taken
# for a frame (SGLang's "[", vLLM's "(" are followed by text).
_FRAME_SAMPLE_LINES = 40
_FRAME_SHARE = 0.6


_LEADING_CODES_RE = re.compile(rb"(?:\x1b\[[0-9;]*m)*")


def _frame_symbol(line: bytes) -> bytes | None:
    """The symbol that opens ``line`` as a frame would ("│ ", "| ", "> "), after colour codes, or None."""
    codes = _LEADING_CODES_RE.match(line)
    if codes is not None and codes.end():
        line = line[codes.end() :]
    space = line.find(b" ", 0, 5)
    if space <= 0:
        return None
    lead = line[:space]
    try:
        char = lead.decode()
    except UnicodeDecodeError:
        return None
    if len(char) != 1 or char.isalnum() or char in "[({<\"'`":
        return None
    return lead


def learn_frame(block: bytes) -> bytes | None:
    """The frame symbol most of the block's first lines open with (and, for a single line, close with too)."""
    # The first lines only, found one by one: splitting would copy the rest of a block of megabytes.
    lines: list[bytes] = []
    start = 0
    for _ in range(2 * _FRAME_SAMPLE_LINES):  # blank lines count too: a block of them is read no further
        if len(lines) >= _FRAME_SAMPLE_LINES or start >= len(block):
            break
        end = block.find(b"\n", start)
        if end < 0:
            end = len(block)
        line = block[start:end].rstrip(b"\r")
        if line.strip():
            lines.append(line)
        start = end + 1
    if not lines:
        return None
    leads = [_frame_symbol(line) for line in lines]
    first = next((lead for lead in leads if lead is not None), None)
    if first is None:
        return None
    framed = leads.count(first)
    if framed >= 2 and framed >= _FRAME_SHARE * len(lines):
        return first
    # A single framed line is believed only when the same symbol closes it as well.
    if len(lines) == 1 and len(lines[0]) > 2 * len(first) + 1 and lines[0].endswith(b" " + first):
        return first
    return None


# A Markdown quote that holds part of a block only (a quoted excerpt followed by another server's log): its lines'
# "> " comes off run by run, a run being at least three lines in a row (a lone "> " opens many a server line).
_QUOTE_RUN_RE = re.compile(rb"(?m)^(?:(?:\x1b\[[0-9;]*m)*>(?: [^\n]*)?\r?\n){3,}")
_QUOTE_MARK_RE = re.compile(rb"(?m)^((?:\x1b\[[0-9;]*m)*)> ?")


def _quote_openings(block: bytes) -> list[int]:
    """Where the lines after the first that open as a quote's does (colour codes at most, then ">") start.

    Found from each ">" (a few hundred a megabyte of a server's log, found by memchr) rather than by a pattern tried
    at every line start: that pass cost more than the rest of the quote handling."""
    starts = []
    find = block.find
    at = find(b">", 1)  # the first line has no line break before it: the caller looks at it
    while at > 0:
        before = block[at - 1]
        if before == 10:  # "\n"
            starts.append(at)
        elif before == 109:  # "m": the last of colour codes that may open the line
            start = block.rfind(b"\n", 0, at) + 1
            codes = _LEADING_CODES_RE.match(block, start)
            if start > 0 and codes is not None and codes.end() == at:
                starts.append(start)
        at = find(b">", at + 1)
    return starts


def _unquote_run(run: re.Match[bytes]) -> bytes:
    return _QUOTE_MARK_RE.sub(rb"\1", run.group())


def _unquote_runs(block: bytes) -> bytes:
    """``block`` with the "> " of each run of quoted lines removed; the same object when it has none."""
    # Only such lines can be in a run, so the pattern is tried on each stretch of them in a row that is long
    # enough to hold one, not at every line start of the block (one scan for them, in C).
    starts = _quote_openings(block)
    plain = block.startswith(b">")
    codes = _LEADING_CODES_RE.match(block)  # the first line has no "\n" before it
    if plain or block.startswith(b">", codes.end() if codes is not None else 0):
        starts.insert(0, 0)
    # Read only where some line opens with ">" itself (a block whose quotes all follow colour codes is left).
    if not (plain or any(block[start : start + 1] == b">" for start in starts)):
        return block
    pieces: list[bytes] = []
    done = 0
    index = 0
    count = len(starts)
    while index < count:
        first = index
        end = block.find(b"\n", starts[index]) + 1
        while end > 0 and index + 1 < count and starts[index + 1] == end:
            index += 1
            end = block.find(b"\n", end) + 1
        index += 1
        if index - first < 3:
            continue
        stop = end if end > 0 else len(block)
        pieces.append(block[done : starts[first]])
        pieces.append(_QUOTE_RUN_RE.sub(_unquote_run, block[starts[first] : stop]))
        done = stop
    if not pieces:
        return block
    pieces.append(block[done:])
    return b"".join(pieces)


def unframe(block: bytes) -> bytes:
    """``block`` without the pane frame its lines carry; the same object when they carry none."""
    symbol = learn_frame(block)
    if symbol is None:
        return _unquote_runs(block)
    mark = re.escape(symbol)
    framed = re.sub(rb"(?m)^((?:\x1b\[[0-9;]*m)*)" + mark + rb" ", rb"\1", block)
    # The closing border and the padding before it (the pane's width, not the server's text).
    return re.sub(rb"(?m)[ \t]*" + mark + rb"[ \t]*(?=\r?$)", b"", framed)


# A paste indented as a whole (a quoted block, pytest's captured output, a Markdown list item): every line opens with
# the same blanks. They go, so that an error line that the server wrote at the start of its line ("KeyError: 'x'")
# is not taken for a traceback's indented code line. A server's own log never indents every line.
_INDENT_SAMPLE_LINES = 40
_INDENT_MIN_LINES = 2
_FRAME_LINE = b'File "'


def learn_indent(block: bytes, known: bytes | None = None) -> bytes | None:
    """The blanks that every one of the block's first non-blank lines opens with, or None. ``known``: what the log's
    earlier blocks shared; a block whose lines all open with it keeps it however few they are."""
    if known is not None:
        kept = _shared_indent(block, known, 1)
        if kept == known:
            return known
    return _shared_indent(block, None, _INDENT_MIN_LINES)


def _shared_indent(block: bytes, common: bytes | None, min_lines: int) -> bytes | None:
    """The longest run of blanks (no longer than ``common``, when given) that opens each of the block's first
    non-blank lines, when there are at least ``min_lines`` of them."""
    seen = 0
    start = 0
    size = len(block)
    frames: list[bytes] = []  # the leads of traceback frame lines, weighed after the other lines'
    for _ in range(2 * _INDENT_SAMPLE_LINES):  # blank lines count too: a block of them is read no further
        if seen >= _INDENT_SAMPLE_LINES or start >= size:
            break
        end = block.find(b"\n", start)
        if end < 0:
            end = size
        line = block[start:end].rstrip(b"\r")
        start = end + 1
        if not line.strip():
            continue
        lead = line[: len(line) - len(line.lstrip(b" \t"))]
        seen += 1
        if line.startswith(_FRAME_LINE, len(lead)):
            frames.append(lead)
            continue
        if not lead:
            return None
        common = lead if common is None else _common_blanks(common, lead)
        if not common:
            return None
    for lead in frames:
        # Python prints a traceback's frames 2 blanks in: those are the traceback's, not the paste's (an excerpt
        # that starts inside a traceback holds nothing else in its first lines). A frame that opens with what the
        # other lines share is the paste's, however many of its own blanks it kept: output spliced into a
        # traceback's line can eat them (a notebook's stderr, batch 47).
        if common is not None and lead.startswith(common):
            continue
        common = lead[:-2] if common is None else _common_blanks(common, lead[:-2])
        if not common:
            return None
    return common if seen >= min_lines else None


def _common_blanks(common: bytes, lead: bytes) -> bytes:
    """The blanks both open with (compared byte by byte: a tab is not a space)."""
    pairs = enumerate(zip(common, lead, strict=False))
    return common[: next((i for i, (a, b) in pairs if a != b), min(len(common), len(lead)))]
