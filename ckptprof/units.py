"""Parsing and formatting of byte sizes, rates and ages."""

from __future__ import annotations

import re

# Rates are decimal gigabytes per second throughout ckptprof (GB/s), like the storage and PCIe figures they are
# held against.
GB = 1e9
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_MULTIPLIERS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "ki": 2**10,
    "kib": 2**10,
    "mi": 2**20,
    "mib": 2**20,
    "gi": 2**30,
    "gib": 2**30,
    "ti": 2**40,
    "tib": 2**40,
}


def parse_size(text: str) -> int:
    """'4.7GB' -> 4_700_000_000, '512MB', '1GiB', '123' (bytes). Raises ValueError on anything else."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (try 512MB, 4.7GB or 1GiB)")
    number, unit = match.groups()
    value = float(number) * _MULTIPLIERS[(unit or "").lower()]
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return round(value)


def human_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def gbps(nbytes: float, seconds: float) -> float:
    """Throughput in GB/s (1e9 bytes), 0.0 when nothing was timed."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def age_words(seconds: float) -> str:
    """How old something is, in the unit a reader takes in at once: 45 s, 12 min, 2.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
