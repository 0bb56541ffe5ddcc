"""Messages are read once per shape (their digits written as 0): what that gives must be what reading each message
whole gives, on the real corpus's messages and on their numbers changed at random."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog import reading
from ckptprof.bootlog.digit_blind import digit_word_parts, digit_words_pattern, pattern_is_digit_blind
from ckptprof.bootlog.parse import parse_record
from ckptprof.bootlog.reading import TABLES_FOR_STYLE, _read_message, read_message

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


def _messages() -> list[str]:
    messages: dict[str, None] = {}
    for log in sorted(REAL.glob("*.log")):
        for line in log.read_text("utf-8", "replace").splitlines():
            if any(char.isdigit() for char in line):
                messages[parse_record(line).message] = None
    return list(messages)


MESSAGES = _messages()


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"world_size=(?P<world>\d{1,6}) rank=(?P<rank>\d{1,6})", True),
        (r"Initializing an? (?:V\d )?LLM engine", True),
        (r"\btype=\w*(?:Eagle|NextN|MTP)", True),
        (r"[^\]\n]{0,40}[0-9a-f]+(?=\d)(?!x)(?>\s*)", True),
        (r"on V1 engine", False),  # a literal digit
        (r"rank [1-7]", False),  # some digits and not others
        (r"[^0]", False),
        (r"(\d)\1", False),  # a back-reference compares the digits themselves
        (r"(?:a|b9)", False),
    ],
)
def test_a_pattern_is_digit_blind_when_no_digit_is_singled_out(pattern: str, blind: bool) -> None:
    assert pattern_is_digit_blind(re.compile(pattern)) is blind


def test_words_with_digits_are_found_with_any_digit() -> None:
    words = ["Load weight end", "on V1 engine", "GPU blocks: 0,"]
    found = digit_words_pattern(words)
    assert found is not None
    assert found.search("Using the on V0 engine") and found.search("# GPU blocks: 7, # CPU")
    assert not found.search("Load weight end. on V engine")
    assert digit_word_parts(words) == (" engine", "GPU blocks: ")
    assert digit_words_pattern(["no digits"]) is None


def test_the_engines_tables_are_read_by_shape() -> None:
    # The speed this buys is the reader's: every table the reader reads with is digit-blind.
    for tables in TABLES_FOR_STYLE.values():
        assert reading._shapes_for(tables).words is not None


@pytest.mark.parametrize("style", sorted(TABLES_FOR_STYLE))
def test_every_real_message_reads_by_shape_as_it_reads_whole(style: str) -> None:
    tables = TABLES_FOR_STYLE[style]
    reading._SHAPES.pop(id(tables), None)
    assert len(MESSAGES) > 10_000
    differ = [m for m in MESSAGES if read_message(m, tables) != _read_message(m, tables)]
    assert differ == []


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(MESSAGES), st.randoms(use_true_random=False))
def test_a_message_with_other_numbers_reads_as_itself(message: str, rng: object) -> None:
    # GIVEN a real message read once, then the same message with its digits changed at random
    tables = TABLES_FOR_STYLE["plain unknown"]
    read_message(message, tables)
    other = re.sub(r"\d", lambda _: str(rng.randrange(10)), message)  # type: ignore[attr-defined]
    # THEN the other reads by its shape as it reads whole
    assert read_message(other, tables) == _read_message(other, tables)


@pytest.mark.parametrize(
    ("word", "look_alike"),
    [
        ("Using Flash Attention backend on V1 engine.", "Using Flash Attention backend on V2 engine."),
        ("# GPU blocks: 0, # CPU blocks: 2048", "# GPU blocks: 5, # CPU blocks: 2048"),
    ],
)
def test_a_digit_in_a_rules_word_is_no_number(word: str, look_alike: str) -> None:
    # GIVEN a line whose rule's word holds a digit, read after a look-alike with another digit there
    tables = TABLES_FOR_STYLE["vllm"]
    reading._SHAPES.pop(id(tables), None)
    other = read_message(look_alike, tables)
    read = read_message(word, tables)
    # THEN each reads as itself: the rule's line by its rule, the look-alike by none or another
    assert read == _read_message(word, tables) and read.rule is not None
    assert other == _read_message(look_alike, tables) and other.rule != read.rule
