"""Release numbers as SGLang and vLLM write them ("0.5.23", "0.4.6.post5", "0.5.0rc1"), compared as numbers.

A small reader of our own: `packaging` is not a dependency, and these projects only use release numbers with an
optional post/rc/dev suffix.
"""

from __future__ import annotations

import re
from importlib import metadata

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
