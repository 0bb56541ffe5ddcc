"""Whether what a message says depends on the values of its digits, or only on where they stand.

Ranks and releases print the same message with other numbers in it (`Load weight end. ... avail mem=89.06 GB` on
each rank, a throughput line every few seconds): the reader keeps one reading per *shape*, the message with each
ASCII digit written as ``0`` (reading.read_message). That is exact where every pattern and word a reading is made
with matches a digit only through a class that holds all ten or none (``\\d``, ``\\w``, ``.``, ``[^\\]]``): replacing
one digit by another then changes no match. A word with a digit in it (vLLM's `on V1 engine`) would be made or
unmade by the replacement, so a message in which it could stand (the word with any digit there) is read whole.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# Every ASCII digit written as "0", in the message's UTF-8 bytes: the shape of a message. Non-ASCII digits stay:
# ``\d`` without re.ASCII matches them, and they are rare enough that a shape of their own costs nothing.
DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")

# The standard library's own parser of patterns (re._parser from 3.11, sre_parse before): opcodes are read by name.
_parser: Any = importlib.import_module("re._parser" if hasattr(re, "_parser") else "sre_parse")
_DIGITS = range(ord("0"), ord("9") + 1)


def pattern_is_digit_blind(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` matches a string exactly where it matches the string's shape (DIGITS_TO_ZERO): no literal
    digit, no set that holds some digits and not others, no back-reference (which compares the digits themselves)."""
    return _items_blind(_parser.parse(pattern.pattern, pattern.flags))


def words_are_digit_free(words: tuple[str, ...] | list[str]) -> bool:
    return not any(char.isdigit() for word in words for char in word)


def _items_blind(items: Any) -> bool:
    for op, argument in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL"):
            if argument in _DIGITS:
                return False
        elif name == "IN":
            if not _set_blind(argument):
                return False
        elif name in ("GROUPREF", "GROUPREF_EXISTS"):
            return False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if not _items_blind(argument[2]):
                return False
        elif name == "SUBPATTERN":
            if not _items_blind(argument[-1]):
                return False
        elif name in ("ASSERT", "ASSERT_NOT"):
            if not _items_blind(argument[1]):
                return False
        elif name == "BRANCH":
            if not all(_items_blind(branch) for branch in argument[1]):
                return False
        elif name == "ATOMIC_GROUP":
            if not _items_blind(argument):
                return False
        elif name not in ("ANY", "AT", "CATEGORY"):  # pragma: no cover - an opcode this reader has not met
            return False
    return True


def _set_blind(members: Any) -> bool:
    """A set (``[...]``) holds every digit or none."""
    for op, argument in members:
        name = str(op)
        if name == "LITERAL" and argument in _DIGITS:
            return False
        if name == "RANGE":
            low, high = argument
            inside = sum(1 for code in _DIGITS if low <= code <= high)
            if 0 < inside < len(_DIGITS):
                return False
        # NEGATE, CATEGORY (\d, \w, \s and their complements) hold every digit or none.
    return True


def digit_words_pattern(words: list[str]) -> re.Pattern[str] | None:
    """A pattern that finds any of ``words`` that holds a digit, with any digit in its place ("on V1 engine" ->
    "on V\\d engine"): a message where it finds one is not read by its shape. None when no word holds a digit."""
    with_digits = [word for word in dict.fromkeys(words) if any(char.isdigit() for char in word)]
    if not with_digits:
        return None
    return re.compile(
        "|".join(
            "".join(r"\d" if char.isdigit() else re.escape(char) for char in word) for word in with_digits
        )
    )


def digit_word_parts(words: list[str]) -> tuple[str, ...]:
    """The longest run without a digit of each word that holds one ("on V1 engine" -> " engine"): a message without
    it cannot hold the word, whatever its digit."""
    parts = []
    for word in dict.fromkeys(words):
        if any(char.isdigit() for char in word):
            parts.append(max(re.split(r"\d", word), key=len))
    return tuple(parts)
