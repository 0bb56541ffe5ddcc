"""The text level of boot logs: prefixes, bar frames, carriage-return sharing, ANSI, chunking, timestamps."""

from __future__ import annotations

import io
import random
import re

import pytest

from ckptprof.bootlog.parse import (
    Bar,
    LineSplitter,
    Record,
    bar_runs,
    candidate_lines,
    clock_seconds,
    iter_blocks,
    looks_binary,
    parse_bar,
    parse_rate,
    parse_record,
    split_line,
    strip_ansi,
    worker_rank_label,
)
from ckptprof.bootlog.timestamps import (
    first_timestamp,
    last_timestamp_before,
    shift_timestamp,
    timestamp_seconds,
)

SHARD_FRAME = "Loading safetensors checkpoint shards:  62% Completed | 40/64 [00:24<00:14,  1.64it/s]"


@pytest.mark.parametrize(
    ("line", "timestamp", "rank", "message"),
    [
        (
            "[2025-11-29 10:00:01 TP3] Load weight begin. avail mem=60.81 GB",
            "2025-11-29 10:00:01",
            "TP3",
            "Load weight begin. avail mem=60.81 GB",
        ),
        (
            "[2025-11-29 10:00:01] Init torch distributed begin.",
            "2025-11-29 10:00:01",
            "",
            "Init torch distributed begin.",
        ),
        (
            "[2025-11-29 10:00:01.123 DP1 PP0 TP13 EP13] x",
            "2025-11-29 10:00:01.123",
            "DP1 PP0 TP13 EP13",
            "x",
        ),
        (
            "INFO 11-29 10:00:01 [loader.py:123] Loading weights took 39.12 seconds",
            "11-29 10:00:01",
            "",
            "Loading weights took 39.12 seconds",
        ),
        (
            "(VllmWorker rank=3 pid=4203) INFO 11-29 10:00:01 [gpu_model_runner.py:1] Starting to load model m...",
            "11-29 10:00:01",
            "rank3",
            "Starting to load model m...",
        ),
        ("(Worker_TP2 pid=1) WARNING 11-29 10:00:01.250 [x.py:9] hi", "11-29 10:00:01.250", "TP2", "hi"),
        (
            "INFO:     Uvicorn running on http://0.0.0.0:30000",
            None,
            "",
            "INFO:     Uvicorn running on http://0.0.0.0:30000",
        ),
    ],
)
def test_parse_record_reads_sglang_and_vllm_prefixes(
    line: str, timestamp: str | None, rank: str, message: str
) -> None:
    record = parse_record(line)
    assert (record.timestamp, record.rank, record.message) == (timestamp, rank, message)


def test_parse_record_keeps_unprefixed_text_as_plain() -> None:
    assert parse_record("torch.OutOfMemoryError: CUDA out of memory.") == Record(
        None, "", "torch.OutOfMemoryError: CUDA out of memory.", "plain"
    )


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("VllmWorker rank=3", "rank3"),
        ("Worker_TP3", "TP3"),
        ("EngineCore_DP1", "DP1"),
        ("APIServer", ""),
        ("EngineCore_0", "DP0"),  # vLLM 0.9-0.10: the engine core of DP rank 0
        ("EngineCore_3", "DP3"),
        ("EngineCore", ""),
    ],
)
def test_worker_rank_label(name: str, label: str) -> None:
    assert worker_rank_label(name) == label


def test_parse_bar_reads_sglang_shard_bar() -> None:
    parsed = parse_bar(SHARD_FRAME)
    assert parsed is not None
    bar, end = parsed
    assert bar == Bar("Loading safetensors checkpoint shards", 40, 64, "", "00:24", "00:14", "1.64it/s")
    assert (bar.rate, bar.elapsed_s, bar.eta_s) == (1.64, 24, 14)
    assert end == len(SHARD_FRAME)


def test_parse_bar_reads_standard_tqdm_bar_and_slow_rates() -> None:
    parsed = parse_bar(
        "Capturing batches (bs=160 avail_mem=20.5 GB):  26%|██▌       | 6/23 [00:05<00:15,  2.50s/it]"
    )
    assert parsed is not None
    bar = parsed[0]
    assert (bar.desc, bar.done, bar.total, bar.elapsed_s, bar.eta_s) == (
        "Capturing batches (bs=160 avail_mem=20.5 GB)",
        6,
        23,
        5,
        15,
    )
    assert bar.rate == pytest.approx(0.4)


def test_parse_bar_rejects_text_that_only_mentions_percentages() -> None:
    assert parse_bar("token usage: 12% of the pool") is None


@pytest.mark.parametrize(
    ("text", "rate"), [("1.80it/s", 1.8), ("?it/s", None), ("4.00s/it", 0.25), ("0s/it", None)]
)
def test_parse_rate(text: str, rate: float | None) -> None:
    assert parse_rate(text) == (pytest.approx(rate) if rate is not None else None)


@pytest.mark.parametrize(
    ("text", "seconds"), [("00:37", 37), ("01:02", 62), ("1:00:05", 3605), ("?", None), ("", None)]
)
def test_clock_seconds(text: str, seconds: int | None) -> None:
    assert clock_seconds(text) == seconds


def test_split_line_separates_bar_frames_from_a_glued_record() -> None:
    """GIVEN rank 0's frames and another rank's record on one physical line (tqdm ends frames with nothing)."""
    line = f"\r{SHARD_FRAME.replace('40/64', '39/64')}\r{SHARD_FRAME}[2025-11-29 10:01:19 TP2] Using default MoE config"
    items = list(split_line(line))
    assert [type(item).__name__ for item in items] == ["Bar", "Bar", "Record"]
    assert isinstance(items[1], Bar) and items[1].done == 40
    assert items[2] == Record("2025-11-29 10:01:19", "TP2", "Using default MoE config", "sglang")


def test_split_line_strips_ansi_colours_and_worker_prefix_on_bars() -> None:
    line = f"\r\x1b[1;36m(VllmWorker rank=0 pid=4200)\x1b[0;0m {SHARD_FRAME}\n"
    items = list(split_line(line))
    assert len(items) == 1 and isinstance(items[0], Bar)
    assert items[0].rank == "rank0"


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[32mINFO\x1b[0m 11-29") == "INFO 11-29"
    assert strip_ansi("plain") == "plain"


def test_line_splitter_cuts_on_newlines_and_carriage_returns() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"[a] one\n[b] tw") == b"[a] one\n"
    assert splitter.feed(b"o\rbar") == b"[b] two\r"
    assert splitter.flush() == b"bar"


def test_line_splitter_keeps_the_head_of_an_over_long_line() -> None:
    """GIVEN a 1 MiB line fed in pieces WHEN split with a 1 KiB cap THEN only its first KiB survives."""
    splitter = LineSplitter(max_line_bytes=1024)
    out = splitter.feed(b"start\n" + b"x" * 300_000)
    for _ in range(3):
        out += splitter.feed(b"y" * 300_000)
    out += splitter.feed(b"z" * 100 + b"\nnext line\n")
    lines = out.split(b"\n")
    assert lines[0] == b"start"
    assert lines[1] == b"x" * 1024
    assert lines[2] == b"next line"


def test_line_splitter_hands_over_a_finished_bar_frame() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"\r" + SHARD_FRAME.encode()) == b"\r"
    assert splitter.take_bar_frame() == SHARD_FRAME.encode()
    assert splitter.feed(b"\r[2025-11-29 10:00:00] half a rec") == b"\r"
    assert splitter.take_bar_frame() == b""


def test_iter_blocks_reassembles_lines_across_reads() -> None:
    data = b"".join(f"[2025-11-29 10:00:{i % 60:02d}] line {i}\n".encode() for i in range(2000))
    blocks = list(iter_blocks(io.BytesIO(data), chunk_bytes=777))
    assert b"".join(blocks) == data
    assert all(block.endswith(b"\n") for block in blocks)


CANDIDATES = re.compile(rb"Load weight|Killed")


def test_candidate_lines_finds_only_lines_with_needles() -> None:
    block = b"[t] Decode batch\n[t TP1] Load weight begin.\nnoise\r\nKilled\n"
    assert [line for _, line in candidate_lines(block, CANDIDATES)] == [
        b"[t TP1] Load weight begin.",
        b"Killed",
    ]


def test_last_and_first_timestamp_skip_untimed_lines() -> None:
    block = (
        b"garbage\n[2025-11-29 10:00:01 TP0] a\n\x1b[1;36m(VllmWorker rank=0 pid=1)\x1b[0;0m INFO 11-29 10:00:02 [x.py:1] b\n"
        b"\rbar 5%\n  File x\n"
    )
    assert first_timestamp(block) == "2025-11-29 10:00:01"
    assert last_timestamp_before(block, len(block)) == "11-29 10:00:02"
    assert last_timestamp_before(block, block.index(b"\x1b")) == "2025-11-29 10:00:01"


def test_timestamps_convert_and_shift_in_their_own_style() -> None:
    assert timestamp_seconds("2025-11-29 10:00:02") - timestamp_seconds("2025-11-29 10:00:00") == 2  # type: ignore[operator]
    assert timestamp_seconds("2025-13-29 10:00:00") is None
    assert shift_timestamp("2025-11-29 10:00:01.500", -2.25) == "2025-11-29 09:59:59.250"
    assert shift_timestamp("11-29 10:00:01", -62) == "11-29 09:58:59"
    assert shift_timestamp("2025-11-29 10:00:01", -1e30) == "2025-11-29 10:00:01"


def test_binary_blocks_are_recognised_but_nul_padded_logs_are_not() -> None:
    """GIVEN random bytes (a checkpoint shard passed by mistake) THEN they are binary; a log that starts with
    the NUL run left by a copy-truncate rotation, or carries ANSI colours, is still text."""
    assert looks_binary(random.Random(0).randbytes(1 << 16))
    assert not looks_binary(b"\0" * 4096 + b"[2025-11-29 10:00:00 TP0] Load weight begin.\n")
    assert not looks_binary(b"\x1b[32mINFO\x1b[0m 11-29 10:00:00 [x.py:1] hello\n")


def _frames(head: bytes, counts: list[tuple[int, int]]) -> bytes:
    return b"".join(
        b"\r" + head + b": %3d%%|##| %d/%d [00:01<00:02, 3.00it/s]" % (100 * done // total, done, total)
        for done, total in counts
    )


def test_bar_runs_cut_a_run_to_its_first_and_last_frames_per_bar() -> None:
    """GIVEN frames of one bar, with a worker tag and regex metacharacters in its description, redrawn in place
    WHEN bar_runs reads them THEN each bar of the run keeps its first and last frame, a count that goes down starts
    a new bar, and the run ends at the frame of another bar or at a record glued to a frame."""
    head = b"(VllmWorker rank=0 pid=7) Capturing batches (bs=8 avail_mem=7.19 GB)"
    run = _frames(head, [(0, 4), (1, 4), (2, 4), (0, 4), (3, 4)]) + b"\r\n"
    other = _frames(b"Loading safetensors checkpoint shards", [(1, 2), (2, 2)]) + b"\n"
    block = run + other
    runs = bar_runs(block, 0)
    assert runs is not None
    pieces, end = runs
    assert end == len(run)  # the other bar's frames are not this run's
    spans = [(block[first[0] : first[1]], block[last[0] : last[1]]) for first, last in pieces]
    assert [(b" 0/4 " in first, b" 2/4 " in last) for first, last in spans[:1]] == [(True, True)]
    assert b" 0/4 " in spans[1][0] and b" 3/4 " in spans[1][1]
    assert len(pieces) == 2
    # The other bar's frames make a run of their own.
    again = bar_runs(block, end)
    assert again is not None and again[1] == len(block)
    # A single frame is no run; a record glued to the second frame ends the run before it.
    assert bar_runs(_frames(head, [(1, 4)]) + b"\n", 0) is None
    glued = _frames(head, [(1, 4), (2, 4), (3, 4)]) + b"[2025-01-01 10:00:00 TP1] Load weight end.\n"
    glued_runs = bar_runs(glued, 0)
    assert glued_runs is not None
    # (a frame ends with the carriage return that starts the next one)
    assert glued_runs[1] == glued.rindex(b"\r", 0, glued.index(b" 3/4 ")) + 1
