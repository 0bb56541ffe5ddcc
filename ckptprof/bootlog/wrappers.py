"""Prefixes that log collectors put in front of every line a server wrote, removed before anything else.

A server's log rarely reaches a user as the server wrote it: ``kubectl logs --timestamps`` and GitHub Actions
put an RFC 3339 time in front of each line, ``docker compose`` the service name and a bar, journald the date,
host and unit. None of them is a rank or a boot record. They are stripped from a whole block in one C-level
substitution, so that every later stage sees the server's own text, and a tqdm frame starts its line again.

Each entry is one wrapper seen in a real log; adding a collector is adding one pattern here.
"""

from __future__ import annotations

import re

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
    # docker compose: sglang-1  | ...
    ("compose", rb"[A-Za-z0-9][\w.-]{0,80}-\d{1,4} {1,40}\| ?"),
    # journald: Dec 18 16:24:02 host python3[1234]:
    ("journald", rb"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,80} [\w./@-]{1,80}\[\d{1,10}\]: "),
)

_ALTERNATIVES = b"|".join(b"(?:" + pattern + b")" for _, pattern in WRAPPER_PATTERNS)
# Collectors can nest (journald around a compose log), so up to two are removed from one line. The patterns
# start with the line break before the line, not with (?m)^: a literal first byte lets the regex engine jump
# from line to line instead of testing every position (3.5 times faster). Bars redrawn in place carry the
# wrapper after each carriage return when the collector saw the frames as lines.
# A paste may indent or colour the collector's line too: that goes with the prefix.
_LEAD = rb"(?:[ \t]|\x1b\[[0-9;]*m)*"
_WRAPPER_RE = re.compile(rb"\n" + _LEAD + rb"(?:" + _ALTERNATIVES + rb"){1,2}")
_WRAPPER_AFTER_CR_RE = re.compile(rb"\r" + _LEAD + rb"(?:" + _ALTERNATIVES + rb"){1,2}")


def unwrap(block: bytes) -> bytes:
    """``block`` without collector prefixes; the same object when it has none (the common, free case)."""
    framed = b"\n" + block
    if _WRAPPER_RE.search(framed) is None:
        return block
    framed = _WRAPPER_RE.sub(b"\n", framed)
    if b"\r" in framed:
        framed = _WRAPPER_AFTER_CR_RE.sub(b"\r", framed)
    return framed[1:]
