"""The block-wide passes of wrappers.py read only the lines that can change (a quote's stretch of lines, a line that
holds a link): what they give back must be what the whole-block substitution gives, on any block. The references
here are that substitution, written out as the behaviour is defined."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog.wrappers import _LINK_RE, _QUOTE_MARK_RE, _QUOTE_RUN_RE, _unquote_runs, unlink


def reference_unquote(block: bytes) -> bytes:
    if not (block.startswith(b">") or b"\n>" in block):
        return block
    return _QUOTE_RUN_RE.sub(lambda run: _QUOTE_MARK_RE.sub(rb"\1", run.group()), block)


def reference_unlink(block: bytes) -> bytes:
    return _LINK_RE.sub(rb"\1", block) if b"](http" in block else block


LINES = st.sampled_from(
    [
        b"> quoted line",
        b">",
        b"> ",
        b">no space",
        b"\x1b[2m> coloured quote",
        b"\x1b[1m\x1b[0m>",
        b"\x1b[31mred, no quote",
        b"[2025-01-01 10:00:00 TP0] Load weight begin.",
        b"tqdm>=4.27 in /usr/lib",
        b"",
        b"  indented",
        b"1[/5](http://host:8888/5) [a](https://b/c) x",
        b"](http not a link",
        b"[x](http://a(b)",
    ]
)


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(LINES, max_size=14))
    ends = draw(st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(lines), max_size=len(lines)))
    block = b"".join(line + end for line, end in zip(lines, ends, strict=True))
    if draw(st.booleans()):
        block += draw(LINES)  # an unterminated last line (analyze_bytes's last block)
    return block


@settings(max_examples=400, deadline=None)
@given(blocks())
def test_unquote_runs_matches_the_whole_block_substitution(block: bytes) -> None:
    assert _unquote_runs(block) == reference_unquote(block)


@settings(max_examples=400, deadline=None)
@given(blocks())
def test_unlink_matches_the_whole_block_substitution(block: bytes) -> None:
    assert unlink(block) == reference_unlink(block)


def test_unquote_reads_runs_behind_colour_codes_and_leaves_short_ones() -> None:
    block = b"head\n\x1b[2m> a\n> b\n\x1b[2m> c\nplain\n> d\n> e\n"
    assert _unquote_runs(block) == b"head\n\x1b[2ma\nb\n\x1b[2mc\nplain\n> d\n> e\n"
    assert re.search(rb"^> ", _unquote_runs(block), re.M) is not None  # the two-line run stays quoted
