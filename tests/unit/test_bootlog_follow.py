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
    """Appends pieces to a file with a pause between them, like a server writing its log."""

    def __init__(self, path: Path, pieces: list[bytes], pause_s: float) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.pieces = pieces
        self.pause_s = pause_s

    def run(self) -> None:
        with self.path.open("ab") as log:
            for piece in self.pieces:
                log.write(piece)
                log.flush()
                time.sleep(self.pause_s)


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
    started = time.monotonic()
    writer.start()
    outcome = follow_log(str(growing_log), timeout_s=10, poll_s=0.02, status=status)
    writer.join()
    assert (outcome.exit_code, outcome.reason) == (0, "ready")
    assert outcome.report.state == "ready"
    assert time.monotonic() - started < 5
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


def test_follow_keeps_up_with_10_mb_per_second(growing_log: Path) -> None:
    """GIVEN a boot log followed by ~10 MB of serving lines written in 1 s WHEN followed THEN it reaches
    `ready` (written last) within a few seconds."""
    boot = (LOGS / "sglang_tp8_ready.log").read_bytes().replace(b"The server is fired up", b"Warmup done,")
    filler = (
        b"[2025-11-29 10:02:00 TP0] Decode batch. #running-req: 12, #token: 34567, token usage: 0.12\n"
        * 110_000
    )
    pieces = [boot, *pieces_of(filler, 50), READY]
    writer = Writer(growing_log, pieces, pause_s=0.02)
    started = time.monotonic()
    writer.start()
    outcome = follow_log(str(growing_log), timeout_s=15, poll_s=0.02, status=io.StringIO())
    writer.join()
    elapsed = time.monotonic() - started
    assert (outcome.exit_code, outcome.reason) == (0, "ready")
    assert elapsed < 4.5, f"{len(filler) / 1e6:.1f} MB followed in {elapsed:.1f} s"


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
