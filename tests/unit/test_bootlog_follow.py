"""`--follow`: a writer thread grows a log while follow_log tails it."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.bootlog import follow_log
from ckptprof.bootlog.follow import StatusLine

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
READY = b"[2025-11-29 10:03:00] The server is fired up and ready to roll!\n"


class Writer(threading.Thread):
    """Appends pieces to a file with a pause between them, like a server writing its log; ``finished`` is set
    once the last piece is written."""

    def __init__(self, path: Path, pieces: list[bytes], pause_s: float) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.pieces = pieces
        self.pause_s = pause_s
        self.finished = threading.Event()
        self.finished_at = 0.0  # time.perf_counter() when the last piece was written

    def run(self) -> None:
        with self.path.open("ab") as log:
            for i, piece in enumerate(self.pieces):
                log.write(piece)
                log.flush()
                if i == len(self.pieces) - 1:
                    self.finished_at = time.perf_counter()
                    self.finished.set()
                time.sleep(self.pause_s)


class CountingSleep:
    """follow_log's sleep between polls, counting the polls it slept after the writer had written everything."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.after_the_last_piece = 0

    def __call__(self, seconds: float) -> None:
        self.after_the_last_piece += self.writer.finished.is_set()
        time.sleep(seconds)


def pieces_of(data: bytes, count: int) -> list[bytes]:
    size = max(1, len(data) // count)
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.fixture
def growing_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "server.log"
    path.write_bytes(b"")
    yield path


def test_follow_exits_0_when_the_server_becomes_ready(growing_log: Path) -> None:
    """GIVEN a log cut while the draft loads, then the rest of the boot arriving in pieces
    WHEN followed THEN follow_log returns 0 once `fired up and ready` is written."""
    boot = (LOGS / "sglang_tp8_eagle3_newer_ready.log").read_bytes()
    writer = Writer(growing_log, pieces_of(boot, 20), pause_s=0.02)
    status = io.StringIO()
    sleep = CountingSleep(writer)
    writer.start()
    # (timeout_s is a hang guard: a follower that never sees `ready` ends with "timeout" and fails below)
    outcome = follow_log(str(growing_log), timeout_s=60, poll_s=0.02, status=status, sleep=sleep)
    writer.join()
    assert (outcome.exit_code, outcome.reason) == (0, "ready")
    assert outcome.report.state == "ready"
    # THEN it returns as soon as it has read the line: at most one poll's sleep after the last piece was written
    # (it may have gone to sleep just before), never a wait for the timeout or for more lines
    assert sleep.after_the_last_piece <= 1
    assert "ready: the server reported ready" in status.getvalue().splitlines()[-1]


def test_follow_exits_1_when_a_rank_dies(growing_log: Path) -> None:
    crash = (LOGS / "sglang_tp8_eagle3_crash.log").read_bytes()
    writer = Writer(growing_log, pieces_of(crash, 10), pause_s=0.02)
    writer.start()
    outcome = follow_log(str(growing_log), timeout_s=10, poll_s=0.05, status=io.StringIO())
    writer.join()
    assert (outcome.exit_code, outcome.reason) == (1, "failed")
    assert outcome.report.error is not None and "OutOfMemoryError" in outcome.report.error


def test_follow_shows_the_draft_bar_before_tqdm_writes_a_newline(growing_log: Path) -> None:
    """A caught-up follower must not lag a frame behind: tqdm leaves the newest frame unterminated."""
    seed = (LOGS / "sglang_tp8_eagle3_cut_loading_draft.log").read_bytes()
    head = seed[: seed.rindex(b"\r")]  # ends in the middle of the frames: the 40/64 frame is the last one
    growing_log.write_bytes(head)
    outcome = follow_log(str(growing_log), timeout_s=0.2, poll_s=0.05, status=io.StringIO())
    assert outcome.reason == "timeout"
    assert outcome.report.progress[-1].done == 39
    assert outcome.report.summary.startswith("loading draft weights: 39/64 shards read")


def busy_log() -> list[bytes]:
    """A TP8 boot, ~10 MB of serving lines in 50 pieces, then `ready`: what a busy server writes in about 1 s."""
    boot = (LOGS / "sglang_tp8_ready.log").read_bytes().replace(b"The server is fired up", b"Warmup done,")
    filler = (
        b"[2025-11-29 10:02:00 TP0] Decode batch. #running-req: 12, #token: 34567, token usage: 0.12\n"
        * 110_000
    )
    return [boot, *pieces_of(filler, 50), READY]


def test_follow_reads_10_mb_of_serving_lines_through_to_ready(growing_log: Path) -> None:
    """GIVEN a boot log followed by ~10 MB of serving lines written in 1 s WHEN followed THEN it reads every line
    and reaches `ready` (written last). How fast it keeps up is benchmarks/bench_bootlog.py's to hold."""
    writer = Writer(growing_log, busy_log(), pause_s=0.02)
    sleep = CountingSleep(writer)
    writer.start()
    # (timeout_s is a hang guard: a follower that never sees `ready` ends with "timeout" and fails below)
    outcome = follow_log(str(growing_log), timeout_s=120, poll_s=0.02, status=io.StringIO(), sleep=sleep)
    writer.join()
    assert (outcome.exit_code, outcome.reason) == (0, "ready")
    # THEN it read through to the last line (its time is the log's clock at the end) and kept the boot's phases
    assert outcome.report.last_timestamp == "2025-11-29 10:03:00"
    assert all(phase.ranks == 8 for phase in outcome.report.phases if phase.name != "ready")
    assert sleep.after_the_last_piece <= 1


def test_follow_starts_over_when_the_log_is_truncated(growing_log: Path) -> None:
    growing_log.write_bytes((LOGS / "sglang_tp8_eagle3_crash.log").read_bytes()[:5000] + b"x" * 20000 + b"\n")

    def restart() -> None:
        time.sleep(0.2)
        growing_log.write_bytes((LOGS / "sglang_tp1_ready.log").read_bytes())

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    outcome = follow_log(str(growing_log), timeout_s=5, poll_s=0.02, status=io.StringIO())
    thread.join()
    assert outcome.reason == "ready"
    assert all(phase.ranks == 1 for phase in outcome.report.phases)


def test_status_line_on_a_pipe_writes_only_changes() -> None:
    clock = iter([0.0, 0.1, 0.2, 0.3]).__next__
    stream = io.StringIO()
    line = StatusLine(stream, clock)
    line.draw("a")
    line.draw("a")
    line.draw("b")
    assert stream.getvalue() == "a\nb\n"
