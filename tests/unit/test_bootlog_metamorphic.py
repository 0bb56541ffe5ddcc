"""Every log of the real corpus, re-emitted the way pastes and terminals decorate it, reads as the original does
(#33 item 5): the same framework, state, phases (name, model, ranks), failure and error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ckptprof.bootlog import BootReport, analyze_bytes
from ckptprof.bootlog.parse import utf8_bytes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log"))


def _indented(data: bytes) -> bytes:
    """A quoted paste or captured output: four spaces before every line."""
    return b"\n".join(b"    " + line if line else line for line in data.split(b"\n"))


def _coloured(data: bytes) -> bytes:
    """A terminal's colours around every line (a log viewer's level colouring)."""
    return b"\n".join(b"\x1b[36m" + line + b"\x1b[0m" if line else line for line in data.split(b"\n"))


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def _kubectl(data: bytes) -> bytes:
    """`kubectl logs --timestamps`: the collector's own time before every line."""
    return b"\n".join(
        b"2026-12-02T10:00:00.123456789Z " + line if line else line for line in data.split(b"\n")
    )


def _paned(data: bytes) -> bytes:
    """Copied out of a terminal pane (k9s, tmux): a border and a space before every line, the line padded to the
    pane's width and closed by the border again."""
    width = max(len(line) for line in data.split(b"\n")) + 2
    return b"\n".join(
        "│ ".encode() + line.ljust(width) + "│".encode() if line else line for line in data.split(b"\n")
    )


TRANSFORMS: dict[str, Callable[[bytes], bytes]] = {
    "indent4": _indented,
    "ansi": _coloured,
    "crlf": _crlf,
    "kubectl": _kubectl,
    "pane": _paned,
}


def _reading(report: BootReport) -> dict[str, object]:
    failure = report.failure
    return {
        "framework": report.framework,
        "state": report.state,
        "phases": [(phase.name, phase.model, phase.ranks) for phase in report.phases],
        "failure": (failure.rank, failure.phase, failure.model) if failure else None,
        # what failed, as the report words it: an indented paste's error line is still its error line
        "error": report.error,
        # which model the server serves, as its configuration names it: a decoration is no part of the name
        "model_name": report.model_name,
    }


# (log, decoration) pairs the reader does not yet read as the original; strict, so a fix flips them. Why, each.
DECORATED_WRONG: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_a_decorated_real_log_reads_as_the_original(
    log: Path, transform: str, request: pytest.FixtureRequest
) -> None:
    why = DECORATED_WRONG.get((log.stem, transform))
    if why is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=why))
    data = utf8_bytes(log.read_bytes())  # a UTF-16 log's text: a collector decorates the text it shows
    assert _reading(analyze_bytes(TRANSFORMS[transform](data))) == _reading(analyze_bytes(data))
