"""Batch 52 (reports/cpu/2026-12-06m-bootlog-unseen): an SGLang boot copied out of Google Cloud Logging's console, each
line behind the entry's severity and time, and the lines newest first (sglang#5096)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptprof.bootlog import analyze_bytes, analyze_path
from ckptprof.bootlog.newest_first import (
    NEWEST_FIRST_WARNING,
    OldestFirst,
    reversed_blocks,
    reversed_lines,
    runs_newest_first,
)
from ckptprof.bootlog.parse import iter_blocks, utf8_bytes
from ckptprof.bootlog.wrappers import unwrap

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
CLOUD = REAL / "sglang-sglang-5096-llama31-70b-tp8-gcp-logging-reversed-tp1-exception.log"


def test_cloud_loggings_severity_and_time_come_off_a_line() -> None:
    """GIVEN a line as Cloud Logging's console shows it WHEN unwrapped THEN the server's own record is left; vLLM's
    own `ERROR 04-05 ...` (no year, no "T") stays as it is."""
    line = b"ERROR 2025-04-05T00:01:19.198923587Z [2025-04-05 00:01:19 TP1] Scheduler hit an exception:\n"
    assert unwrap(b"x\n" + line) == b"x\n[2025-04-05 00:01:19 TP1] Scheduler hit an exception:\n"
    assert unwrap(b"INFO 2025-04-05T00:01:04+00:00 [2025-04-05 00:01:04 TP0] ok\n") == (
        b"[2025-04-05 00:01:04 TP0] ok\n"
    )
    assert unwrap(b"x\nWARN 2025-04-05T00:01:04Z INFO 04-05 00:01:04 [core.py:1] ok\n") == (
        b"x\nINFO 04-05 00:01:04 [core.py:1] ok\n"
    )
    vllm = b"ERROR 04-05 00:01:19 [core.py:1] EngineCore failed to start.\n"
    assert unwrap(b"x\n" + vllm) == b"x\n" + vllm


def test_the_cloud_logging_paste_reads_as_the_rank_that_failed() -> None:
    """GIVEN the batch's log (newest first, behind Cloud Logging's prefix) WHEN read THEN TP1 failed, the three
    ranks' `sglang is using nccl` come first, and the report says the log was read from its last line."""
    report = analyze_path(str(CLOUD))
    assert (report.framework, report.state) == ("sglang", "failed")
    assert report.failure is not None and report.failure.rank == "TP1"
    assert report.warnings[0] == NEWEST_FIRST_WARNING
    assert not any("not understood" in warning for warning in report.warnings)


def _reading(data: bytes) -> dict[str, object]:
    reading = analyze_bytes(data).to_dict()
    reading["warnings"] = [warning for warning in reading["warnings"] if warning != NEWEST_FIRST_WARNING]
    return reading


def test_no_log_of_the_corpus_as_written_runs_newest_first() -> None:
    """GIVEN every real log WHEN its first block is looked at THEN only the one pasted newest first is taken for
    one: a log written oldest first is never read backwards."""
    flagged = [
        log.name for log in sorted(REAL.glob("*.log")) if runs_newest_first(utf8_bytes(log.read_bytes()))
    ]
    assert flagged == [CLOUD.name]


def test_a_log_turned_newest_first_reads_as_the_log() -> None:
    """GIVEN every real log with its lines in the opposite order WHEN its stamps say it runs newest first THEN it
    reads as the log itself (the same boots, phases, times, ranks and failure), and the report says it was turned.

    The stamps of a short excerpt may not tell (fewer than three lines older than the one above them): such a log is
    read as it is written, and at least 225 of the 546 logs of 2026-12-06 evening are turned (231 then)."""
    turned = 0
    for log in sorted(REAL.glob("*.log")):
        data = utf8_bytes(log.read_bytes())
        backwards = reversed_lines(data)
        if runs_newest_first(data) or not runs_newest_first(backwards):
            continue
        turned += 1
        assert _reading(backwards) == _reading(data), log.name
        assert analyze_bytes(backwards).warnings[0] == NEWEST_FIRST_WARNING
    assert turned >= 225


@given(
    lines=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    ends_with_newline=st.booleans(),
    chunk_bytes=st.integers(min_value=1, max_value=64),
)
@example(lines=[b"a" * 50, b"b"], ends_with_newline=True, chunk_bytes=8)  # a line longer than a chunk
def test_a_spooled_log_read_back_from_its_end_is_its_lines_reversed(
    lines: list[bytes], ends_with_newline: bool, chunk_bytes: int
) -> None:
    """GIVEN any lines (a last one with or without its newline) WHEN read back from the end a chunk at a time THEN
    the blocks are whole lines and together are the lines in the opposite order."""
    data = b"\n".join(lines) + (b"\n" if ends_with_newline and lines else b"")
    blocks = list(reversed_blocks(io.BytesIO(data), len(data), chunk_bytes))
    assert all(block.endswith(b"\n") for block in blocks)
    assert b"".join(blocks) == reversed_lines(data)


@pytest.mark.parametrize("chunk_bytes", [64, 4096, 1 << 20])
def test_a_newest_first_file_is_read_back_in_pieces(tmp_path: Path, chunk_bytes: int) -> None:
    """GIVEN a long log written newest first (a real boot turned, many times over) WHEN its blocks are read THEN they
    are its lines oldest first, whatever the size of the pieces it is read back in, and the progress counted every
    byte of the file."""
    boot = (REAL.parent / "sglang_tp8_eagle3_newer_ready.log").read_bytes()
    oldest_first = boot * 40
    path = tmp_path / "newest-first.log"
    path.write_bytes(reversed_lines(oldest_first))
    counted: list[int] = []
    with path.open("rb") as stream:
        blocks = OldestFirst(
            iter_blocks(stream), on_read=lambda block: counted.append(len(block)), chunk_bytes=chunk_bytes
        )
        read = b"".join(blocks)
    assert blocks.reversed
    assert read == oldest_first
    assert sum(counted) == path.stat().st_size
    assert analyze_path(str(path)).phases == analyze_bytes(oldest_first).phases
