"""Release numbers as SGLang and vLLM write them ("0.5.23", "0.4.6.post5", "0.5.0rc1"), compared as numbers.

A small reader of our own: `packaging` is not a dependency, and these projects only use release numbers with an
optional post/rc/dev suffix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import metadata
from typing import Protocol, TypeVar

_VERSION_RE = re.compile(
    r"v?(\d{1,4}(?:\.\d{1,6}){0,3})(?:[.-]?(post|rc|dev|a|b)(\d{0,6}))?(?:\+[\w.]*)?", re.ASCII
)
# A pre-release sorts before its release, a post-release after it.
_SUFFIX_RANK = {"dev": -3, "a": -2, "b": -1, "rc": -1, None: 0, "post": 1}

Version = tuple[tuple[int, ...], int, int]


def parse_version(text: str) -> Version:
    """'0.5.23' -> ((0, 5, 23), 0, 0); '0.4.6.post5' -> ((0, 4, 6), 1, 5). ValueError when it is not one."""
    match = _VERSION_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a release number (like 0.5.23 or 0.4.6.post5)")
    numbers = tuple(int(part) for part in match.group(1).split("."))
    numbers += (0,) * (3 - len(numbers))
    return numbers, _SUFFIX_RANK[match.group(2)], int(match.group(3) or 0)


def installed_version(distribution: str) -> str | None:
    """The version of an installed distribution, read from its metadata (the package is never imported)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


class ReleaseLine(Protocol):
    """A run of releases that load the same way: its name ("0.5.16 and later") and its first release."""

    @property
    def name(self) -> str: ...

    @property
    def first(self) -> str: ...


Line = TypeVar("Line", bound=ReleaseLine)


def line_for(version: str, lines: Sequence[Line]) -> Line:
    """The line ``version`` belongs to: the last whose first release is not after it (the oldest line for a release
    older than every line's first). ValueError for a text that is not a release number."""
    wanted = parse_version(version)
    chosen = lines[0]
    for line in lines:
        if parse_version(line.first) <= wanted:
            chosen = line
    return chosen


def line_named(name: str, lines: Sequence[Line]) -> Line | None:
    return next((line for line in lines if line.name == name), None)
