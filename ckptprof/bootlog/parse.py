"""The text level of a boot log: bounded chunking, record prefixes, tqdm bar frames (timestamps: timestamps.py).

A physical line of a server log can hold several things: tqdm redraws its bar with a carriage return and no
newline, so the bar's frames and the next record another rank writes share one line. This module cuts the byte
stream into those pieces and parses each one; what the records mean is reading.py's and actions.py's business.
"""

from __future__ import annotations

import codecs
import math
import re
import sys
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import BinaryIO, NamedTuple, TypeAlias

from ckptprof.errors import os_problem

CHUNK_BYTES = 1 << 20
# A multi-megabyte line (a dumped tensor, a base64 blob) is kept only up to here: nothing we look for is
# further than a few kilobytes into a line, and the cap keeps memory bounded.
MAX_LINE_BYTES = 64 << 10


class LogInputError(Exception):
    """The log cannot be read at all (missing, a directory, no permission); the message names the file."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class Record(NamedTuple):
    """One log record: ``rank`` is the prefix's tag ("TP3", "DP1 TP3", "rank3") or "" when untagged."""

    timestamp: str | None
    rank: str
    message: str
    style: str  # "sglang", "vllm" or "plain": which prefix it carried
    level: str = ""  # vLLM's level word (INFO, ERROR, ...), when the prefix has one
    # Ray's summary of a line other workers printed too ("... [repeated 30x across cluster]"), printed after the
    # first copy with that copy's stamp and one worker's tag: the words count, but it is no event of that rank. The
    # number of copies it stands for (30), 0 for any other record.
    relayed: int = 0
    # The process id of the worker tag the rank was read from ("(Worker_TP0 pid=374) ": "374"), "" when none: vLLM V1
    # tags a worker "(Worker pid=374)" until it knows its rank, then "(Worker_TP0 pid=374)" (Boot.named_pids).
    pid: str = ""
    # The name in that tag ("Worker_TP0", "Llumlet"), "" when none: a name that names no rank is one process's until
    # several processes write under it at once (Boot.concurrent_process).
    process: str = ""


# A record (or a bar frame) built as a plain tuple of all its fields: their constructor is namedtuple's Python function,
# and a record is built for each line read (a vLLM record twice: its stamp gets its year). 0.1 us less each, about
# 6 ms on 16 MiB of the real corpus. Every field is given, in the class's order.
new_record = tuple.__new__


class Bar(NamedTuple):
    """One frame of a tqdm progress bar. Its timings are kept as written and read only when reported: a log
    holds millions of frames and only each bar's last one is ever shown."""

    desc: str
    done: int
    total: int
    rank: str
    elapsed_text: str = ""
    remaining_text: str = ""
    rate_text: str = ""

    @property
    def rate(self) -> float | None:
        """Items per second."""
        return parse_rate(self.rate_text)

    @property
    def elapsed_s(self) -> int | None:
        return clock_seconds(self.elapsed_text)

    @property
    def eta_s(self) -> int | None:
        return clock_seconds(self.remaining_text)


# ASCII-only digit classes: int() must never see a Unicode digit, and bounded repeats keep int() and the
# regex engine cheap on hostile input.
# Colour codes, also as pastes mangle them: the escape byte replaced by U+FFFD, or written out as "#033"
# (CloudWatch) or "^[" (a terminal's caret notation). A paste in that notation also ends each line with "^M", its
# carriage return (vllm-ascend#922), before any colour code or carriage return the line ends with: no part of the
# record's words.
_ANSI_RE = re.compile(
    r"(?:\x1b|\ufffd|#033|\^\[)\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>78]|\^M(?=(?:\x1b\[[0-9;]*m|\r)*\Z)"
)
# The escape byte's codes alone, for a text that holds none of the mangled forms (most coloured lines): a pattern that
# starts with one literal character, which the regex engine skips to, where _ANSI_RE tests every character against
# the four that can start a code.
_ESCAPE_CODE_RE = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[()][A-Za-z0-9]|[=>78])")
# SGLang's record prefix; releases before 0.4 wrote the time without the date ("[17:43:23 TP6]").
_SGLANG_PREFIX_RE = re.compile(
    r"\[((?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)((?: [A-Z][A-Z_]{0,15}\d{1,6})*)\] ?", re.ASCII
)
# The same prefix with its time cut away by whoever pasted the log ("[TP0] Scheduler hit an exception: ...", where
# the paste also shortened paths to ".../"): SGLang always prints the time, but the rank tags alone still name the
# scheduler. Only the tags SGLang writes (scheduler.py: DP, PP, ATTN_CP, MOE_DP, TP, EP), so that another tool's
# bracketed word with a number is no rank.
_SGLANG_TAG = r"(?:ATTN_CP|MOE_DP|DP|PP|TP|EP)\d{1,6}"
_SGLANG_UNTIMED_PREFIX_RE = re.compile(rf"\[({_SGLANG_TAG}(?: {_SGLANG_TAG}){{0,5}})\] ", re.ASCII)
# SGLang 0.2's model runner wrote its worker's GPU into its messages, before any time or rank prefix existed
# (`logger.info(f"[gpu_id={self.gpu_id}] Load weight begin. ...")`, model_runner.py): one worker per GPU, so the GPU
# names the rank (GPU0; the index of the device, which is the TP rank only where the server's GPUs start at 0).
_SGLANG_GPU_ID_RE = re.compile(r"\[gpu_id=(\d{1,4})\] ", re.ASCII)
# vLLM's multiprocess workers prefix every line: "(VllmWorker rank=3 pid=123) ", "(Worker_TP3 pid=1) ".
# A process name may hold parentheses itself, two deep: Ray Data names its actors after their stages
# ("(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=162837) ", ray-project/ray#56905). Ray names private actor
# classes as written, with their leading underscore: "(_MapWorker pid=1)", "(_EngineBackgroundProcess pid=4800, ...)".
_PROCESS_NAME = r"[A-Za-z_](?:[^()\n]|\((?:[^()\n]|\([^()\n]{0,80}\)){0,80}\)){0,80}?"
_WORKER_PREFIX_RE = re.compile(
    r"\((" + _PROCESS_NAME + r") pid=(\d{1,10})(?:, ip=([^()\s]{1,64}))?\) ", re.ASCII
)
_VLLM_PREFIX_RE = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) "
    # the source tag: "[file.py:12] " (0.8 on) or "file.py:12] " (before)
    r"(?:\[[^\]\n]{1,120}(?:\] ?|$)|[\w.-]{1,120}\.py:\d{1,6}\] ?)?",
    re.ASCII,
)
# Ray's own loggers (Serve's controller, proxy and replicas): the level, a dated time with milliseconds after a comma,
# the component (and a replica's id), then " -- " ("INFO 2025-05-19 09:46:26,426 serve 8988 -- Application 'default'
# is ready at http://127.0.0.1:8000/.", ray/serve/_private/logging_utils.py's format).
_RAY_PREFIX_RE = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) [^\n]{1,200}? -- ", re.ASCII
)
_RAY_REPEATED_RE = re.compile(r" ?\[repeated (\d{1,9})x across cluster\]\s*$", re.ASCII)
_TORCH_RANK_RE = re.compile(r"\[rank(\d{1,6})\]: ?", re.ASCII)
_TORCH_GLOG_RE = re.compile(
    r"(?:\[rank\d{1,6}\]: ?)?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} {1,8}\d{1,10} [^\]\s]{1,200}:\d{1,6}\] "
    r"(?:\[\d{1,4}/\d{1,4}\] )?",
    re.ASCII,
)
_WORKER_RANK_RE = re.compile(r"rank=(\d{1,6})", re.ASCII)
_WORKER_TAG_RE = re.compile(r"(?<![A-Za-z])(DP|PP|TP|EP)(\d{1,6})", re.ASCII)
# vLLM 0.9-0.10 named each data-parallel engine core process by its DP rank alone ("EngineCore_1"; 0.11 on:
# "EngineCore_DP1"), so four DP engines' identical records are four ranks', not one rank's said four times.
_ENGINE_CORE_INDEX_RE = re.compile(r"EngineCore_(\d{1,6})$", re.ASCII)
# Ray's tag for a data-parallel engine core run as an actor (--data-parallel-backend=ray; v1/engine/core.py's
# DPEngineCoreActor): one actor per DP rank, the class name alone, so the actors are told apart by process id
# (kuberay#4366).
_DP_ENGINE_ACTOR = "DPEngineCoreActor"
# tqdm frames: "desc: 40% Completed | 40/64 [00:37<00:14, 1.64it/s]" (SGLang's bar_format), "desc:  40%|####  |
# 40/64 [...]" (tqdm's default), "desc: 40% 40/64 [...]" (no bar when tqdm is not on a terminal), "  0%|  | 0/13
# [...]" (no description). A frame cut at the end of a pasted excerpt may lack its closing bracket.
# A frame whose timings were cut off (the last line of an excerpt: "... 5/145 [", "... 11/32 [00:0") still shows its
# count; it is taken for a frame only when its bar body ("Completed |", "|###  |") says it is tqdm's.
_BAR_DESC_MAX = 200
# A frame after its description: the percentage, tqdm's bar or "Completed |", the count, then the timings.
_BAR_AFTER_DESC = (
    r"(?P<pct>\d{1,3})%(?P<body> Completed \||\|[^|\n]{0,1000}\|)? *"
    r"(?P<done>\d{1,12})/(?P<total>\d{1,12})"
    r"(?: \[(?P<elapsed>[\d:]{1,16})<(?P<remaining>[\d:?]{1,16})(?:, *(?P<rate>[^\]\n]{0,40}))?(?:\]|$)"
    r"|(?(body) ?\[?[\d:]{0,16}$|(?!)))"
)
# The whole frame: the shortest description (no line break, at most _BAR_DESC_MAX characters) after which a colon and
# the rest match, or none. parse_bar reads it in two pieces that find the same (tests/unit/test_bootlog_prefilter.py).
_BAR_RE = re.compile(rf"(?:(?P<desc>[^\r\n]{{0,{_BAR_DESC_MAX}}}?): *| *){_BAR_AFTER_DESC}", re.ASCII)
_BAR_AFTER_COLON_RE = re.compile(rf": *{_BAR_AFTER_DESC}", re.ASCII)
_COLON_PERCENT_RE = re.compile(r": *\d{1,3}%", re.ASCII)  # what _BAR_AFTER_COLON_RE's match starts with
_BAR_WITHOUT_DESC_RE = re.compile(rf" *{_BAR_AFTER_DESC}", re.ASCII)
_BAR_TAG_RE = re.compile(r"^(?:\[[^\[\]\n%]{1,60}\] ?)+")
_RATE_RE = re.compile(r"(?P<value>[\d.]{1,20})\s*(?P<left>[A-Za-z]*)/(?P<right>[A-Za-z]+)", re.ASCII)
# Every byte value except the control bytes that never appear in a text log (NUL is judged separately).
_TEXT_BYTES = bytes(
    b for b in range(256) if b == 0 or (b >= 0x20 and b != 0x7F) or b in b"\t\n\r\x0b\x0c\x1b"
)


def open_log(path: str) -> BinaryIO:
    """Open a log for binary reading; "-" is standard input. Raises LogInputError with a reason."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise LogInputError(path, os_problem(exc, "a log file")) from None


class LineSplitter:
    """Cuts a byte stream into blocks that end on a line boundary ("\\n" or "\\r"), capping long lines.

    Feed it arbitrary pieces; each call returns the complete lines received so far. A line longer than
    ``max_line_bytes`` keeps its head and loses the rest, so memory stays bounded whatever the input.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._max_line_bytes = max_line_bytes
        self._pending = b""
        self._discarding = False

    def feed(self, data: bytes) -> bytes:
        if self._discarding:
            cut = _first_line_break(data)
            if cut < 0:
                return b""
            data = data[cut:]
            self._discarding = False
        buffer = self._pending + data if self._pending else data
        # A carriage return ends a bar frame as well as a newline ends a record: cutting there lets a
        # follower see the bar move before tqdm ever writes a newline.
        cut = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        complete, rest = (b"", buffer) if cut < 0 else (buffer[: cut + 1], buffer[cut + 1 :])
        if len(rest) > self._max_line_bytes:
            rest = rest[: self._max_line_bytes]
            self._discarding = True
        self._pending = rest
        return complete

    def flush(self) -> bytes:
        rest, self._pending, self._discarding = self._pending, b"", False
        return rest

    def take_bar_frame(self) -> bytes:
        """The unterminated tail, when it is a whole tqdm frame.

        tqdm ends a frame with nothing at all (the next frame's carriage return ends it), so a reader that has
        caught up with a growing file would otherwise always show the bar one frame late.
        """
        tail = self._pending.rstrip(b" ")
        if self._discarding or not tail.endswith(b"]") or b"%" not in tail:
            return b""
        self._pending = b""
        return tail


def _first_line_break(data: bytes) -> int:
    positions = [p for p in (data.find(b"\n"), data.find(b"\r")) if p >= 0]
    return min(positions) if positions else -1


# A log saved as UTF-16 (Windows PowerShell's `>` writes UTF-16LE with a byte order mark, batch 51): every other byte
# of its text is a NUL, which no pattern of the reader's would see through.
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class Utf8Text:
    """A log's bytes, fed piece by piece as they arrive, as the UTF-8 text the reader's patterns are written for:
    passed on as they are, or decoded when the log opens with a UTF-16 byte order mark. Which, the first two bytes
    say: a piece of one byte (a follower that caught up with a writer) is held until the next one."""

    def __init__(self) -> None:
        self._held = b""  # the log's first byte, while it is all there is
        self._decided = False
        self._decoder: codecs.IncrementalDecoder | None = None

    def feed(self, raw: bytes, final: bool = False) -> bytes:
        if not self._decided:
            raw = self._held + raw
            if len(raw) < 2 and not final:
                self._held = raw
                return b""
            self._held, self._decided = b"", True
            if raw[:2] in UTF16_BOMS:
                self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        if self._decoder is None:
            return raw
        return self._decoder.decode(raw, final=final).encode("utf-8")


class Utf16Log:
    """A UTF-16 log read as UTF-8, the bytes the reader's patterns are written for; ``raw_read``: the stream's bytes
    read so far (a progress bar's)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._text = Utf8Text()
        self.raw_read = 0

    def read(self, size: int = -1) -> bytes:
        raw = self._stream.read(size)
        self.raw_read += len(raw)
        return self._text.feed(raw, final=not raw)


def as_utf8(stream: BinaryIO) -> BinaryIO | Utf16Log:
    """``stream`` itself, or a UTF-16 log's UTF-8 view when it opens with a UTF-16 byte order mark (seen without
    consuming it, where the stream can peek)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return stream
    return Utf16Log(stream) if peek(2)[:2] in UTF16_BOMS else stream


def utf8_bytes(data: bytes) -> bytes:
    """``data``, or a UTF-16 log's text as UTF-8 when it opens with a UTF-16 byte order mark."""
    return Utf8Text().feed(data, final=True)


def iter_blocks(stream: BinaryIO | Utf16Log, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Whole-line blocks of a stream, read ``chunk_bytes`` at a time (the last one may lack a newline)."""
    splitter = LineSplitter()
    chunk = stream.read(chunk_bytes)
    while chunk:
        block = splitter.feed(chunk)
        short = len(chunk) < chunk_bytes
        chunk = stream.read(chunk_bytes)
        if short and not chunk:
            # The log's last line, cut before its newline, goes with the lines before it: alone in a block of its
            # own it could not be seen as the rest of a line a terminal wrapped (wrappers.rejoin_wrapped).
            block += splitter.flush()
        if block:
            yield block
    tail = splitter.flush()
    if tail:
        yield tail


def looks_binary(block: bytes) -> bool:
    """True for blocks of binary data (a checkpoint shard, a core dump) rather than log text.

    Reading those line by line would be slow and pointless: random bytes hold a "line" with a "%" every few
    hundred bytes. Text logs hold no control bytes besides tab, newline, carriage return and ANSI's escape;
    NUL runs alone (a log truncated under a writer) do not count, but any other control byte in more than one
    byte in a hundred does.
    """
    if b"\0" not in block:  # memchr: the common case costs nothing
        return False
    controls = len(block.translate(None, _TEXT_BYTES))
    return controls * 100 > len(block)


_Trie: TypeAlias = "dict[str, _Trie]"


def needle_pattern(needles: Iterable[str], anchored: Iterable[tuple[str, int]] = ()) -> re.Pattern[bytes]:
    """One regex that finds any of ``needles``, written as a trie ("Load(?:ing|  weight)..."): the regex engine
    then follows one branch per position instead of trying every needle in turn (twice as fast on real logs).

    ``anchored``: (needle, index) pairs found at their character ``index``, the rest after it matched, then the whole
    needle looked behind for ("V1 engine(?<=on V1 engine)": the look-behind, the dearer test, only where the rest
    matched); branches of the trie's first alternation, so that the engine still skips every position whose
    character starts no branch."""
    tree: _Trie = {}
    for needle in needles:
        node = tree
        for char in needle:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: _Trie) -> str:
        if "" in node:
            return ""  # a shorter needle already makes the line a candidate
        alternatives = [re.escape(char) + branch(child) for char, child in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"

    extra = [re.escape(needle[at:]) + (f"(?<={re.escape(needle)})" if at else "") for needle, at in anchored]
    if not extra:
        return re.compile(branch(tree).encode())
    first = [re.escape(char) + branch(child) for char, child in sorted(tree.items())]
    return re.compile(("(?:" + "|".join(first + extra) + ")").encode())


def candidate_lines(block: bytes, candidates: re.Pattern[bytes]) -> Iterator[tuple[int, bytes]]:
    """(offset, line) for each newline-separated line of ``block`` in which ``candidates`` finds something."""
    search = candidates.search
    pos = 0
    while (match := search(block, pos)) is not None:
        start = block.rfind(b"\n", 0, match.start()) + 1
        end = block.find(b"\n", match.end())
        if end < 0:
            end = len(block)
        yield (
            start,
            block[start : start + MAX_LINE_BYTES] if end - start > MAX_LINE_BYTES else block[start:end],
        )
        pos = end + 1


def _has_escape(text: str) -> bool:
    return "\x1b" in text or _has_mangled_escape(text)


def _has_mangled_escape(text: str) -> bool:
    return "\ufffd[" in text or "#033[" in text or "^[[" in text


def _without_codes(text: str) -> str:
    """``text`` without its colour codes (those of _ANSI_RE)."""
    return (_ANSI_RE if _has_mangled_escape(text) else _ESCAPE_CODE_RE).sub("", text)


def has_bar_or_escape(text: str) -> bool:
    """Whether split_line would find more in ``text`` than its segments: a bar frame's "%" or colour codes."""
    return "%" in text or _has_escape(text)


def strip_ansi(text: str) -> str:
    return _without_codes(text) if _has_escape(text) else text


# What can stand before a record without being part of it: indentation (a quoted or pytest-captured paste), a
# NUL or its caret form "^@" (a terminal's), colour codes.
_DECORATION_FIRST = frozenset(" \t\x00^#\ufffd")
# The start of a whole record prefix (SGLang's dated one, a process tag, vLLM's level and time), looked for
# behind whatever an unknown collector or a re-logging pipeline put in front of it.
_EMBEDDED_PREFIX_RE = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]\n]{0,40}\] "
    r"|\([A-Za-z_][^()\n]{0,80}? pid=\d{1,10}(?:, ip=[^()\s]{1,64})?\) "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d",
    re.ASCII,
)
EMBEDDED_PREFIX_WITHIN = 200
_LEVEL_WORDS = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")


def undecorate(text: str) -> str:
    """``text`` without the decoration a paste or terminal put before its record.

    Indentation is taken off only when a record's own prefix follows it (a bracket, a process tag or a level
    word): an indented traceback or code line keeps it."""
    if text[:1] not in _DECORATION_FIRST:
        return text
    if _has_escape(text):
        text = _without_codes(text)
    stripped = text.lstrip(" \t\x00")
    while stripped.startswith("^@"):
        stripped = stripped[2:].lstrip(" \t\x00")
    removed = text[: len(text) - len(stripped)]
    if not removed:
        return text
    if stripped[:1] in "[(" or stripped.startswith(_LEVEL_WORDS) or "\x00" in removed or "^@" in removed:
        return stripped
    return text


def split_line(line: str) -> Iterator[Record | Bar]:
    """The records and bar frames of one physical line, in order.

    Segments are separated by carriage returns; a bar frame may be followed, in the same segment, by a record
    that another process wrote right after it (tqdm ends a frame without a newline).
    """
    for segment in strip_ansi(line).split("\r"):
        text = segment.rstrip("\n")
        if not text.strip():
            continue
        parsed = parse_bar(text) if "%" in text else None
        if parsed is None:
            yield parse_record(text)
            continue
        bar, bar_end = parsed
        yield bar
        rest = text[bar_end:].strip()
        # A copy that lost tqdm's carriage returns glues a bar's frames into one line ("...1/2 [00:00<00:00,
        # 4.22it/s]Multi-thread loading shards: 100% ..."): each frame that follows is the bar's next, not a record.
        while "%" in rest and (parsed := parse_bar(rest)) is not None:
            bar, bar_end = parsed
            yield bar
            rest = rest[bar_end:].strip()
        if rest:
            yield parse_record(rest)


def parse_record(text: str) -> Record:
    """A record from one segment (ANSI codes already removed); unknown shapes become style "plain"."""
    if text.find("across cluster]", len(text) - 40) >= 0:  # in its last 40 characters, with no copy of them
        # Ray's log deduplication marks the line it kept for several workers: the marker is Ray's, not the
        # record's words (an error would otherwise carry it), and the record is a relay (Record.relayed).
        folded = _RAY_REPEATED_RE.search(text)
        if folded is not None:
            return parse_record(text[: folded.start()])._replace(relayed=int(folded.group(1)))
    first = text[:1]
    if first in _DECORATION_FIRST:
        text = undecorate(text)
        first = text[:1]
    # Every prefix looked for holds a time's colon: most other lines (traceback frames) are passed over at once.
    if (
        first not in "[("
        and text.find(":", 1, EMBEDDED_PREFIX_WITHIN) > 0
        and not text.startswith(_LEVEL_WORDS)
    ):
        embedded = _EMBEDDED_PREFIX_RE.search(text, 1, EMBEDDED_PREFIX_WITHIN)
        if embedded is not None:
            text = text[embedded.start() :]
            first = text[:1]
    if first == "[":
        match = _SGLANG_PREFIX_RE.match(text)
        if match is None and text.find(":", 1, EMBEDDED_PREFIX_WITHIN) > 0:
            # A bracketed tag that is no record's prefix ("[RAW SERVER] ", a harness's): a record may follow it.
            embedded = _EMBEDDED_PREFIX_RE.search(text, 1, EMBEDDED_PREFIX_WITHIN)
            if embedded is not None:
                text = text[embedded.start() :]
                first = text[:1]
                match = _SGLANG_PREFIX_RE.match(text) if first == "[" else None
        if match is not None:
            stamp, tags = match.groups()
            return new_record(Record, (stamp, tags.strip(), text[match.end() :], "sglang", "", 0, "", ""))
        untimed = _SGLANG_UNTIMED_PREFIX_RE.match(text)
        if untimed is not None:
            return Record(None, untimed.group(1), text[untimed.end() :], "sglang")
        gpu = _SGLANG_GPU_ID_RE.match(text)
        if gpu is not None:
            return Record(None, f"GPU{int(gpu.group(1))}", text[gpu.end() :], "sglang")
    rank = ""
    pid = ""
    name = ""
    worker = worker_tag(text) if first == "(" else None
    if worker is not None:
        # Launchers nest process tags (Ray's task, then vLLM's engine core): the innermost names the process.
        end, name, pid = worker
        text = text[end:]
        rank = worker_rank_label(name, pid)
        while text[:1] == "(":
            inner = worker_tag(text)
            if inner is None:
                break
            end, inner_name, inner_pid = inner
            text = text[end:]
            # ...unless it is vLLM V1's lone "Worker" (multiproc_executor.py names a worker so when every parallel
            # size is 1) inside a process that names a rank: `(EngineCore_DP0 pid=..) (Worker pid=..)` is DP0's one
            # rank, and the bars it draws untagged are that rank's (vllm-ascend#4037). Ray's workers inside an engine
            # core are several, told apart by their process ids (dynamo#4941).
            if inner_name != "Worker" or not _names_rank(rank):
                rank = worker_rank_label(inner_name, inner_pid)
                pid = inner_pid
                name = inner_name
        if text[:1] == "[":
            # An SGLang record behind a launcher's process tag (Ray's `(WorkerDict pid=N)` before the lines of the
            # SGLang engine a verl actor runs, batch 45): the record's own prefix names its time and rank, and the
            # actor's pid is the launcher's, shared by every rank it runs.
            inner_record = _SGLANG_PREFIX_RE.match(text)
            if inner_record is not None:
                stamp, tags = inner_record.groups()
                return Record(stamp, tags.strip(), text[inner_record.end() :], "sglang", "", False, pid, name)
            # A launcher's own mark between the tag and the record (Llumnix's `[0/1]` before each line of the
            # worker it runs: `(RayWorkerWrapper pid=287638) [0/1]INFO 07-16 ...`): the record follows it.
            embedded = _EMBEDDED_PREFIX_RE.search(text, 1, EMBEDDED_PREFIX_WITHIN)
            if embedded is not None and text[embedded.start() : embedded.start() + 1] != "(":
                text = text[embedded.start() :]
    elif text.startswith("[rank"):
        # torch.distributed's own prefix on every line a rank prints while it dies: "[rank3]: Traceback ..."
        torch_rank = _TORCH_RANK_RE.match(text)
        if torch_rank is not None:
            rank = f"rank{int(torch_rank.group(1))}"
            text = text[torch_rank.end() :]
    if text[:5] == "[rank" or (text[:1] in "IWEF" and text[1:2].isdigit()):
        # torch's own logger (glog's header: level, date, time, thread, file and line, then dynamo's compile id)
        # on each line of a traceback it logs, after the rank tag and behind a worker's prefix (vllm-ascend#5629:
        # "[rank7]:E0106 03:23:01.677000 37645 site-packages/torch/_subclasses/fake_tensor.py:2721] [0/0] ").
        glog = _TORCH_GLOG_RE.match(text)
        if glog is not None:
            text = text[glog.end() :]
    vllm = _VLLM_PREFIX_RE.match(text)
    if vllm is not None:
        return new_record(
            Record, (vllm.group(2), rank, text[vllm.end() :], "vllm", vllm.group(1), False, pid, name)
        )
    if text.startswith(_LEVEL_WORDS):
        ray = _RAY_PREFIX_RE.match(text)
        if ray is not None:
            return new_record(
                # its milliseconds written as every other dated stamp is ("09:46:26.426")
                Record,
                (
                    ray.group(2).replace(",", "."),
                    rank,
                    text[ray.end() :],
                    "plain",
                    ray.group(1),
                    False,
                    pid,
                    name,
                ),
            )
    if text[:5] == "File " and text[5:6] != '"':
        text = python_frame(text)
    return new_record(
        Record, (None, rank, text, "vllm" if worker is not None else "plain", "", False, pid, name)
    )


# IPython's frame: `File /vol/env/lib/python3.12/site-packages/vllm/worker/worker.py:314, in Worker._init_cache_engine(self)`
# (a method named with its class, its arguments after it).
_IPYTHON_FRAME_RE = re.compile(
    r"File (/[^\n]{1,500}?\.pyx?):(\d{1,7}), in (?:[\w.<>]{1,300}\.)?([\w<>]{1,200})"
)


def python_frame(text: str) -> str:
    """An IPython frame line as Python prints the frame (`File "path", line N, in func`); any other text as it is."""
    frame = _IPYTHON_FRAME_RE.match(text)
    if frame is None:
        return text
    path, line, function = frame.groups()
    return f'File "{path}", line {line}, in {function}'


# A worker whose name holds no rank is labelled by its process id: rank 0 is then the untagged driver.
PID_LABEL = "pid"
# An untagged record that names its own global rank in a world of several (vLLM's workers print `world_size=2 rank=1
# ...` before their line tags are set up) is labelled by that rank: the report names it as the rank's tag does.
WORLD_RANK_LABEL = "global"
# Between a process id and the address of the node it runs on, where its tag names one ("433@10.129.10.184").
HOST_MARK = "@"


def pid_label(pid: str) -> str:
    """The rank label of a worker known by its process id alone: 'pid433', whatever node it runs on (a node is named
    only where two share an id: Boot.host_label)."""
    return f"{PID_LABEL}{int(pid.partition(HOST_MARK)[0])}"


# The process tags read so far, as written ("(VllmWorker rank=3 pid=123) "), with their name and process id: a worker
# writes its tag on every line, and a dictionary finds it again in a third of what the pattern takes to read it.
_WORKER_TAGS: dict[str, tuple[str, str]] = {}
_WORKER_TAGS_KEPT = 256  # a boot's workers several times over; the corpus's 624 would carry from copy to copy


def worker_tag(text: str) -> tuple[int, str, str] | None:
    """The process tag that opens ``text`` (_WORKER_PREFIX_RE's match): where it ends, the process's name and id (with
    its node's address after HOST_MARK where the tag names one).

    A tag read before is looked up by ``text`` up to its first ") ". Only whole tags are kept, and a tag whose first
    ") " ends it is the pattern's match on any text that opens with it: every attempt the pattern makes before its
    match (a shorter name) reads no further than that ") " (no name, digit or address class takes a ")" but a nested
    name's, which would be a longer name than the match's)."""
    close = text.find(") ")
    if close > 0:
        seen = _WORKER_TAGS.get(text[: close + 2])
        if seen is not None:
            return close + 2, seen[0], seen[1]
    match = _WORKER_PREFIX_RE.match(text)
    if match is None:
        return None
    name, pid, ip = match.groups()
    if ip:
        # Ray names the node of a worker on another (`(RayWorkerVllm pid=433, ip=10.129.10.184)`): process ids are
        # a node's own, and two nodes' containers often give their workers the same one.
        pid = f"{pid}{HOST_MARK}{ip}"
    if len(_WORKER_TAGS) >= _WORKER_TAGS_KEPT:
        _WORKER_TAGS.clear()
    _WORKER_TAGS[match.group()] = (name, pid)
    return match.end(), name, pid


def _names_rank(label: str) -> bool:
    """Whether a process tag's label names a rank (TP3, rank3, DP1), not its process id or nothing."""
    return bool(label) and not label.startswith(PID_LABEL)


@lru_cache(maxsize=256)  # likewise: the corpus names 617 processes
def worker_rank_label(name: str, pid: str = "") -> str:
    """'VllmWorker rank=3' -> 'rank3'; 'Worker_TP3' -> 'TP3'; 'EngineCore_DP1' and 'EngineCore_1' -> 'DP1';
    'APIServer' -> '';
    a worker with no rank in its name (V0's 'VllmWorkerProcess', Ray's 'RayWorkerWrapper', and Ray's data-parallel
    'DPEngineCoreActor') -> 'pid123'."""
    rank = _WORKER_RANK_RE.search(name)
    if rank is not None:
        return f"rank{int(rank.group(1))}"
    tags = " ".join(f"{kind}{int(number)}" for kind, number in _WORKER_TAG_RE.findall(name))
    if tags:
        return tags
    engine_core = _ENGINE_CORE_INDEX_RE.search(name)
    if engine_core is not None:
        return f"DP{int(engine_core.group(1))}"
    if pid and ("Worker" in name or name == _DP_ENGINE_ACTOR):
        return pid_label(pid)
    return ""


def parse_bar(text: str) -> tuple[Bar, int] | None:
    """A tqdm frame at the start of ``text`` (after an optional worker prefix) and where it ends."""
    rank = ""
    offset = 0
    worker = worker_tag(text) if text.startswith("(") else None
    while worker is not None:
        offset, name, pid = worker
        rank = worker_rank_label(name, pid)
        # Launchers nest process tags (Ray's worker inside vLLM's engine core: `(EngineCore_0 pid=1) (RayWorkerWrapper
        # pid=2) Loading ...%`): the innermost names the process that drew the bar, as parse_record reads it.
        worker = worker_tag(text[offset:]) if text.startswith("(", offset) else None
        if worker is not None:
            worker = (offset + worker[0], worker[1], worker[2])
    # _BAR_RE's lazy description, read from colon to colon: the pattern tried the rest at every character of it.
    limit = offset + _BAR_DESC_MAX + 1
    for line_break in ("\r", "\n"):
        at = text.find(line_break, offset, limit)
        if at >= 0:
            limit = at
    match = None
    # Only a colon followed by a percentage can end the description (the pattern's own first words): a record with a
    # "%" in it (vLLM's metrics) holds a dozen other colons, each a call to the whole pattern.
    colon = -1
    found = _COLON_PERCENT_RE.search(text, offset)
    while found is not None and found.start() < limit:
        colon = found.start()
        match = _BAR_AFTER_COLON_RE.match(text, colon)
        if match is not None:
            break
        found = _COLON_PERCENT_RE.search(text, colon + 1)
    if match is None:
        match = _BAR_WITHOUT_DESC_RE.match(text, offset)
        if match is None:
            return None
        desc = ""
    else:
        desc = text[offset:colon]
    # One call for every group (they are all named, in this order): a bar line holds dozens of frames.
    _, _, done, total, elapsed, remaining, rate = match.groups()
    desc = desc.strip()
    if desc.startswith("["):
        # A harness's bracketed tag before the bar ("[RAW SERVER] Loading safetensors ..."): no engine's words. A tag
        # that opens the description itself ("[AutoTuner]: Tuning fp4_gemm", FlashInfer's) leaves no colon behind.
        desc = _BAR_TAG_RE.sub("", desc).lstrip(": ")
    bar = new_record(Bar, (desc, int(done), int(total), rank, elapsed or "", remaining or "", rate or ""))
    return bar, match.end()


def parse_rate(text: str) -> float | None:
    """tqdm's rate field in items per second: '1.80it/s' -> 1.8, '2.50s/it' -> 0.4, '?it/s' -> None."""
    match = _RATE_RE.search(text)
    if match is None:
        return None
    try:
        value = float(match["value"])
    except ValueError:
        return None
    if match["left"] == "s" and match["right"] != "s":  # seconds per item
        value = 1.0 / value if value > 0 else math.nan
    return value if math.isfinite(value) else None


def clock_seconds(text: str) -> int | None:
    """'01:02' -> 62, '1:00:05' -> 3605, '?' -> None."""
    seconds = 0
    for part in text.split(":"):
        if not part.isdecimal():
            return None
        seconds = seconds * 60 + int(part)
    return seconds


# A tqdm frame in bytes, for runs of frames: its head (ANSI colours, a worker prefix and the description) is
# matched once, then the frames that repeat that head exactly make the run.
_FRAME_HEAD = (
    rb"(?:\x1b\[[0-9;?]*[A-Za-z])*(?:\([A-Za-z_][^()\r\n]{0,80}? pid=\d{1,10}\)(?:\x1b\[[0-9;?]*[A-Za-z])* \r*)?"
    rb"[^\r\n%]{0,200}?"
)
_FRAME_HEAD_RE = re.compile(rb"(" + _FRAME_HEAD + rb"): *\d{1,3}%")
_FRAME_TAIL = rb": *\d{1,3}%(?: Completed \||\|[^|\r\n]{0,1000}\|)? *(\d{1,12})/(\d{1,12}) \[[^\]\r\n]{0,80}\][ \t]*(?:\r\n?|\n)"
# A whole frame, its head captured (group 1) and then its count and total. One pattern for every bar: a pattern
# compiled for each bar's head cost about 2 ms a bar, more than reading the rest of a typical log.
# tqdm on a terminal starts each frame with a carriage return; pasted, the frames keep it after a newline.
_FRAME_RE = re.compile(rb"\r*(" + _FRAME_HEAD + rb")" + _FRAME_TAIL)
# The same frame's count and total after a head already known: the head holds no "%" (the frame's first), so the
# shortest head that _FRAME_RE would take is that head whenever the head opens the frame and this follows it.
_FRAME_TAIL_RE = re.compile(_FRAME_TAIL)

Span = tuple[int, int]


def bar_runs(block: bytes, start: int) -> tuple[list[tuple[Span, Span]], int] | None:
    """The run of tqdm frames of one bar that starts the line at ``start``, if it has two frames or more.

    Returns, for each bar in the run (a frame whose count went down or whose total changed starts a new one),
    the spans of its first and last frame, and the offset where the run ends. A frame followed by anything
    but a line break (another rank's record glued to it) ends the run and is left to the line reader, and so
    does a frame whose head differs from the first frame's.
    """
    # Two frames hold two "%" before the end of the next line that is not empty (a frame ends at a line break, and the
    # second starts where the first ended, or after empty lines): a bar drawn once (most single bars, a rank's last
    # frame) is passed on at once.
    line_end = block.find(b"\n", start)
    next_end = -1 if line_end < 0 else block.find(b"\n", _after_empty_lines(block, line_end + 1))
    if next_end < 0:
        next_end = len(block)
    first_percent = block.find(b"%", start, next_end)
    if first_percent < 0 or block.find(b"%", first_percent + 1, next_end) < 0:
        return None
    pos = start
    while block.startswith(b"\r", pos):
        pos += 1
    head = _FRAME_HEAD_RE.match(block, pos)
    if head is None:
        return None
    key = head.group(1)
    if b"%" in key:  # a worker's tag with a "%" in it: the shortest head may end inside it
        return _runs(_frames_whole(block, start, key))
    return _runs_after_head(block, start, key)


def _after_empty_lines(block: bytes, at: int) -> int:
    """Where the first line at or after ``at`` that is not empty starts.

    A paste often holds a bar's frames one to a line with an empty line between each two (tqdm's carriage returns
    turned into line breaks twice): the frames still make one run, and the empty lines say nothing."""
    while True:
        if block.startswith(b"\n", at):
            at += 1
        elif block.startswith(b"\r\n", at):
            at += 2
        else:
            return at


def _untagged(key: bytes) -> bytes:
    """A head without the worker's tag that a carriage return parts from its description (``(Worker_TP0 pid=41) \r
    Capturing CUDA graphs``): a process's prefix stands at its line's start only, so the frames tqdm redraws after
    the first on that line have none. The line reader reads the first frame's tag as a record of its own, and each
    frame as an untagged one, so those frames are one bar's. A head with no such tag is itself."""
    return key[key.rfind(b"\r") + 1 :]


def _runs_after_head(block: bytes, start: int, key: bytes) -> tuple[list[tuple[Span, Span]], int] | None:
    """``_runs`` of the frames from ``start`` that open with the head ``key`` (after carriage returns; a frame after
    the first also after empty lines, and without the tag _untagged takes off), in one loop: a bar redrawn in place
    can hold a thousand frames, and a generator's frame and a tuple for each cost a third of reading them."""
    match_tail = _FRAME_TAIL_RE.match
    starts_with = block.startswith
    untagged = _untagged(key)
    pieces: list[tuple[Span, Span]] = []
    first: Span | None = None  # the current bar's first frame
    last_start = last_end = 0  # its newest frame
    previous_done = previous_total = -1
    count = 0
    at = start
    while True:
        if count:  # _after_empty_lines, written out
            while True:
                if starts_with(b"\n", at):
                    at += 1
                elif starts_with(b"\r\n", at):
                    at += 2
                else:
                    break
        # A frame is its carriage returns, the run's head, then its count; one compiled pattern for every bar.
        head_at = at
        while starts_with(b"\r", head_at):
            head_at += 1
        if starts_with(key, head_at):
            head_end = head_at + len(key)
        elif count and starts_with(untagged, head_at):
            head_end = head_at + len(untagged)
        else:
            break
        tail = match_tail(block, head_end)
        if tail is None:
            break
        done_text, total_text = tail.groups()
        done, total, end = int(done_text), int(total_text), tail.end()
        if first is None or total != previous_total or done < previous_done:
            if first is not None:
                pieces.append((first, (last_start, last_end)))
            first = (at, end)
        last_start, last_end = at, end
        previous_done, previous_total = done, total
        count += 1
        at = end
    if first is None or count < 2:
        return None
    pieces.append((first, (last_start, last_end)))
    return pieces, last_end


def _frames_whole(block: bytes, start: int, key: bytes) -> Iterator[tuple[Span, int, int]]:
    """The same frames, each matched whole: for a head whose "%" could end a shorter head than the first frame's."""
    untagged = _untagged(key)
    at = start
    while (match := _FRAME_RE.match(block, at)) is not None:
        frame_head, done_text, total_text = match.groups()
        if frame_head != key and (at == start or frame_head != untagged):
            return
        yield match.span(), int(done_text), int(total_text)
        at = _after_empty_lines(block, match.end())


def _runs(frames: Iterator[tuple[Span, int, int]]) -> tuple[list[tuple[Span, Span]], int] | None:
    """The bars of a run of frames (a frame whose count went down or whose total changed starts a new one): the
    spans of each one's first and last frame, and where the run ends; None for fewer than two frames."""
    pieces: list[tuple[Span, Span]] = []
    first: Span | None = None
    last: Span = (0, 0)
    previous = (-1, -1)
    count = 0
    for span, done, total in frames:
        if first is None or total != previous[1] or done < previous[0]:
            if first is not None:
                pieces.append((first, last))
            first = span
        last = span
        previous = (done, total)
        count += 1
    if first is None or count < 2:
        return None
    pieces.append((first, last))
    return pieces, last[1]
