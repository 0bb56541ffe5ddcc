"""The reader's shortcuts find what their plain definitions find: the needles' regex with the rare needles it finds
at a rare letter, the quote openings found from each ">", the wrapped-line tail looked for only where a decoration
can end, the failure gate split in two, and the needle gate before an engine's rules."""

from __future__ import annotations

import re
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ckptprof.bootlog import analyze_bytes, parse, prefilter, reading, timestamps, wrappers
from ckptprof.bootlog.failures import FAILURE_GATE_RE, FAILURE_GATE_WORDS
from ckptprof.bootlog.parse import needle_pattern
from ckptprof.engines.log_rules import EngineLog, Rule

NEEDLES = ("Load weight", "Loading", "on V1 engine", "sigquit", "rocBLAS error", "%")
ANCHORED = (("on V1 engine", 3), ("sigquit", 3), ("rocBLAS error", 3))
PIECES = st.sampled_from(
    [
        "on V",
        "1 engine",
        "sig",
        "quit",
        "roc",
        "BLAS error",
        "Load",
        " weight",
        "ing",
        "%",
        "V",
        "q",
        "B",
        " ",
        "\n",
        "x",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=12).map("".join))
def test_a_needle_found_at_its_rare_letter_is_found_wherever_it_is(text: str) -> None:
    pattern = needle_pattern((n for n in NEEDLES if n not in dict(ANCHORED)), anchored=ANCHORED)
    found = {match.start() for match in pattern.finditer(text.encode())}
    assert bool(found) == any(needle in text for needle in NEEDLES)


# Pieces of the real needles and what can stand next to them: another byte that reads as NUL in the view in place of
# a needle's first ("CPU blocks" for "GPU blocks"), an anchored needle's anchor with other words before it, NULs.
VIEW_PIECES = st.sampled_from(
    [
        *sorted(prefilter.WORD_BYTES),
        *(needle.encode() for needle in prefilter._ANCHORED_AT),
        b"GPU blocks",
        b"CPU blocks",
        b"PU blocks",
        b"on V",
        b"no V",
        b"1 engine",
        b"world_si",
        b"ze=",
        b"sig",
        b"quit",
        b"BLAS error",
        b"Eng",
        b"INFO",
        b"File",
        b' "',
        b"\x00",
        b"\x01",
        b"%",
        b" ",
        b"\n",
        b"x",
        b"z",
        b"V",
        b"E",
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(VIEW_PIECES, max_size=10).map(b"".join), st.integers(min_value=0, max_value=40))
@example(b"# CPU blocks: 2, GPU blocks: 1", 0)  # the view reads both alike: the block says which it is
@example(b"roc\x00LAS error rocBLAS error", 0)  # a NUL where the anchor stands, then the needle
def test_the_view_finds_what_the_needles_pattern_finds(block: bytes, pos: int) -> None:
    """next_candidate, searching the block's view and checking each find against the block, gives the needles' own
    pattern's first match on every text, from every position."""
    view = prefilter.candidate_view(block)
    assert len(view) == len(block)
    expected = prefilter.CANDIDATE_WORDS_RE.search(block, pos)
    assert prefilter.next_candidate(view, block, pos) == (None if expected is None else expected.span())


def test_the_view_reads_each_needle_first_byte_as_nul_and_nothing_else() -> None:
    view = prefilter.candidate_view(bytes(range(256)))
    mapped = {byte for byte in range(256) if view[byte] == 0}
    assert mapped == {needle[0] for needle in prefilter.WORD_BYTES} | prefilter.ANCHOR_BYTES
    assert view[0] == 1 and ord("%") not in mapped


def test_the_reader_finds_the_anchored_needles_and_scans_for_the_others() -> None:
    for needle, at in prefilter._ANCHORED_AT.items():
        line = f"INFO 01-01 00:00:00 [x.py:1] Using a backend {needle}.".encode()
        found = prefilter.next_candidate(prefilter.candidate_view(line), line, 0)
        assert found is not None and line[found[0]] in prefilter.ANCHOR_BYTES, needle
        assert line[found[0] - at : found[0]] == needle[:at].encode()
        assert needle.encode() not in prefilter._RARE_NEEDLES


def test_a_line_with_an_anchored_needle_alone_is_read() -> None:
    """GIVEN a vLLM excerpt whose only engine words are the attention backend's `on V1 engine` WHEN it is read THEN
    it is vLLM's (the line was not passed over)."""
    log = b"INFO 05-01 10:00:00 [cuda.py:1] Using Flash Attention backend on V1 engine.\n"
    assert analyze_bytes(log).framework == "vllm"


def test_a_death_word_found_at_its_rare_letter_fails_the_boot() -> None:
    log = (
        b"[2025-11-29 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1)\n"
        b"[2025-11-29 10:00:01 TP0] Load weight begin. avail mem=70.00 GB\n"
        b"[2025-11-29 10:00:05] Received sigquit from a child process. It usually means the child failed.\n"
    )
    assert analyze_bytes(log).state == "failed"


WRAP_NEXT = re.compile(rb"\n((?:\x1b\[[0-9;]*m)*)[a-z_]")  # the definition wrappers._WRAP_NEXT_RE speeds up


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"\n", b"\x1b[", b"\x1b[0m", b"\x1b[1;36m", b"a", b"_", b"A", b" ", b"m", b"1"]),
        max_size=20,
    )
)
def test_a_wrapped_lines_rest_is_found_where_the_plain_pattern_finds_it(pieces: list[bytes]) -> None:
    block = b"".join(pieces)
    assert [m.span(1) for m in wrappers._WRAP_NEXT_RE.finditer(block)] == [
        m.span(1) for m in WRAP_NEXT.finditer(block)
    ]


# The plain definition of timestamps._LINE_TIMESTAMP_RE, its colour codes in plain repeats.
PLAIN_LINE_TIMESTAMP = re.compile(
    rb"[ \t]*(?:\x1b\[[0-9;]*m)*(?:\[((?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)[ \]]"
    rb"|(?:\([^()\n]{1,90}\)(?:\x1b\[[0-9;]*m)* )?(?:\x1b\[[0-9;]*m)*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    rb"(?:\x1b\[[0-9;]*m)*"
    rb" (\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) )"
)
STAMP_PIECES = st.sampled_from(
    [
        b"[2025-11-29 10:00:01 TP0] ",
        b"[10:00:01 TP0] ",
        b"[2025-11-29 10:00:01.123]",
        b"INFO",
        b"ERROR",
        b" 11-29 10:00:02 ",
        b"(VllmWorker rank=0 pid=1)",
        b"\x1b[1;36m",
        b"\x1b[0m",
        b"\x1b[",
        b" ",
        b"\t",
        b"(",
        b")",
        b"x",
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(STAMP_PIECES, max_size=8).map(b"".join))
@example(b"\x1b[1;36m(VllmWorker rank=0 pid=1)\x1b[0;0m INFO 11-29 10:00:02 x")
@example(b"\x1b[36m\x1b[0m INFO 11-29 10:00:02 x")
def test_a_lines_stamp_read_past_its_colour_codes_is_what_the_plain_pattern_reads(line: bytes) -> None:
    fast = timestamps._LINE_TIMESTAMP_RE.match(line)
    plain = PLAIN_LINE_TIMESTAMP.match(line)
    assert (fast is None) == (plain is None)
    if fast is not None and plain is not None:
        assert (fast.span(), fast.groups()) == (plain.span(), plain.groups())


CODE_PIECES = st.sampled_from(
    [
        "\x1b",
        "\ufffd",
        "#033",
        "^[",
        "[",
        "1;36",
        "0",
        ";",
        "?",
        "m",
        "K",
        "(",
        ")",
        "B",
        "=",
        "7",
        "x",
        " ",
        "\r",
    ]
)


@settings(max_examples=800, deadline=None)
@given(st.lists(CODE_PIECES, max_size=16).map("".join))
@example("\x1b[1;36m(VllmWorker pid=1)\x1b[0;0m INFO x \ufffd[0m")  # an escape byte and a mangled one
def test_colour_codes_come_off_as_the_whole_pattern_takes_them(text: str) -> None:
    assert parse.strip_ansi(text) == parse._ANSI_RE.sub("", text)


QUOTE_OPENING = re.compile(rb"\n(?:\x1b\[[0-9;]*m)*>")  # the definition _quote_openings replaces


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"\n", b">", b"\x1b[", b"\x1b[0m", b"\n\x1b[2m>", b"1", b";", b"m", b"a", b" ", b"\r"]
        ),
        max_size=30,
    )
)
def test_quote_openings_are_the_lines_the_pattern_finds(pieces: list[bytes]) -> None:
    block = b"".join(pieces)
    assert wrappers._quote_openings(block) == [m.start() + 1 for m in QUOTE_OPENING.finditer(block)]


LINE = st.sampled_from(
    [
        b"x" * 60,
        b"y" * 60,
        b"z" * 59 + b"m",
        b"w" * 58 + b"\x1b[0m",
        b"v" * 60 + b"\r",
        b"u" * 56 + b"\x1b[1m\r",
        b"tail_of_a_word",
        b"abc",
        b"",
        b'  File "x.py", line 1, in f',
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE, max_size=12))
def test_a_wrapped_lines_tail_is_what_the_pattern_reads_everywhere(lines: list[bytes]) -> None:
    block = b"\n".join(lines)
    fast = wrappers.rejoin_wrapped(block)
    with mock.patch.object(
        wrappers, "_TAIL_LAST_BYTES", frozenset(range(256))
    ):  # the tail pattern on every line
        assert wrappers.rejoin_wrapped(block) == fast


GATE_PIECES = st.sampled_from(
    [
        *FAILURE_GATE_WORDS,
        "Err",
        "or",
        "fail",
        "ed",
        "is ",
        "dead",
        "E",
        "x",
        " ",
        "sig",
        "quit",
        "above ",
        "exception",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(GATE_PIECES, max_size=8).map("".join))
def test_the_failure_gate_finds_what_its_pattern_finds(message: str) -> None:
    assert reading.may_fail_words(message) == (FAILURE_GATE_RE.search(message) is not None)


def _every_rule_in_order(engine: EngineLog, message: str) -> Rule | None:
    """The rules tried in their table's order, with no gate before them: what _first_rule must give."""
    for rule in engine.records:
        if rule.needle in message and (rule.pattern is None or rule.pattern.search(message) is not None):
            return rule
    return None


RULE_PIECES = st.sampled_from(
    [
        *sorted({rule.needle for engine in reading.ENGINES for rule in engine.records}),
        "Load",
        "ing ",
        "weights",
        " took 1.5 seconds",
        "# cuda ",
        "# CPU ",
        "blocks: 12",
        " ",
        "x",
        "sglang",
        "V1",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(RULE_PIECES, max_size=5).map("".join))
def test_the_needle_gate_lets_through_every_message_a_rule_reads(message: str) -> None:
    for engine in reading.ENGINES:
        assert reading._first_rule(engine, message) is _every_rule_in_order(engine, message)


BAR_PIECES = st.sampled_from(
    [
        "Loading safetensors checkpoint shards",
        "(VllmWorker rank=1 pid=42) ",
        "[RAW SERVER] ",
        ": ",
        ":",
        "  ",
        "50",
        "100",
        "7",
        "%",
        " Completed | ",
        "|####      | ",
        "1/2",
        "12/12",
        " [00:01<00:02, 1.5it/s]",
        " [00:01<?, ?it/s]",
        "[00:01",
        "x",
        "\n",
        "\r",
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(BAR_PIECES, max_size=10).map("".join))
@example("x\n: 50% Completed | 1/2")  # no description crosses a line break
@example("x" * 201 + ": 50% Completed | 1/2")  # nor runs past _BAR_DESC_MAX
@example("a: b: 50% Completed | 1/2 [00:01<00:02, 1.5it/s]")  # the first colon after which the rest matches
def test_a_bar_frame_read_colon_by_colon_is_what_the_whole_pattern_reads(text: str) -> None:
    found = parse.parse_bar(text)
    worker = parse._WORKER_PREFIX_RE.match(text) if text.startswith("(") else None
    whole = parse._BAR_RE.match(text, worker.end() if worker else 0)
    assert (found is None) == (whole is None)
    if found is not None and whole is not None:
        bar, end = found
        assert end == whole.end()
        assert (bar.done, bar.total, bar.elapsed_text, bar.remaining_text, bar.rate_text) == (
            int(whole["done"]),
            int(whole["total"]),
            whole["elapsed"] or "",
            whole["remaining"] or "",
            whole["rate"] or "",
        )
        assert (whole["desc"] or "").strip().endswith(bar.desc.strip())


TAG_PIECES = st.sampled_from(
    [
        "(",
        ")",
        ") ",
        " ",
        "pid=",
        "12",
        "3",
        ", ip=",
        "10.0.0.1",
        "Worker",
        "_TP",
        "rank=",
        "Map(",
        "x",
        "\n",
        "INFO",
    ]
)


@settings(max_examples=800, deadline=None)
@given(st.lists(st.lists(TAG_PIECES, max_size=12).map("".join), min_size=1, max_size=6))
@example(["(Worker pid=12) INFO", "(Worker pid=12) (Worker pid=3) x"])
@example(["(A(b pid=1) x", "(A(b pid=1) pid=2) x"])  # a name that opens a bracket it closes after its ") "
@example(["(Map(B(c)) pid=7) x", "(Map(B(c)) pid=7) y"])  # Ray Data's nested stage names
def test_a_process_tag_looked_up_again_is_what_the_pattern_reads(texts: list[str]) -> None:
    """worker_tag's dictionary of tags read before gives the pattern's own answer on every text, whichever tags
    earlier texts left in it."""
    parse._WORKER_TAGS.clear()
    for text in texts:
        for start in range(len(text)):
            piece = text[start:]
            match = parse._WORKER_PREFIX_RE.match(piece)
            expected = None if match is None else (match.end(), match.group(1), match.group(2))
            assert parse.worker_tag(piece) == expected, (piece, texts)
            # again: from the dictionary now, when it was a tag
            assert parse.worker_tag(piece) == expected, (piece, texts)
