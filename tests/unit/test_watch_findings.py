"""What watch says about what it saw, on hand-built records: a rank that ended before the server, a server past
loading, read amplification; and the live view's lines."""

from __future__ import annotations

import io
from pathlib import Path

from ckptprof.watch.counters import ProcCounters
from ckptprof.watch.procs import RankProcess, Role
from ckptprof.watch.record import RankTrack, WatchRecord
from ckptprof.watch.residency import ModelTrack, ShardTrack
from ckptprof.watch.view import Screen, lines
from ckptprof.watch.watcher import findings

MB = 1_000_000


def counters(at: float, read: int, busy: float = 0.6) -> ProcCounters:
    return ProcCounters(
        at=at,
        read_bytes=read,
        syscr=10,
        rchar=read,
        major_faults=1,
        user_s=busy * 5 / 6 * at,
        system_s=busy / 6 * at,
        rss_bytes=100 * MB,
        threads=4,
        state="storage",
        thread_classes={"storage": 1, "waiting": 3},
    )


def rank(tp: int, reads: list[int], gone_s: float | None = None, busy: float = 0.6) -> RankTrack:
    proc = RankProcess(1000 + tp, Role("sglang", "rank", f"sglang::scheduler_TP{tp}", tp, (("TP", tp),)), 0.0)
    samples = [counters(float(i), r, busy) for i, r in enumerate(reads)]
    track = RankTrack(proc, 0.0, samples[0], samples[-1], samples, gone_s=gone_s)
    return track


def record(
    ranks: list[RankTrack], resident_at_start: int, end: str = "exited", duration: float = 10.0
) -> WatchRecord:
    model = ModelTrack("target", "/ckpt", "--model-path")
    model.shards = [ShardTrack("a.safetensors", Path("/ckpt/a"), 100 * MB, resident_at_start, 100 * MB)]
    rec = WatchRecord(1, ["python"], False, 0.5, "2026-12-02T21:00:00+00:00", engine="sglang", end_reason=end)
    rec.ranks, rec.models, rec.duration_s = ranks, [model], duration
    return rec


def test_a_rank_that_ended_a_while_before_the_others_is_named() -> None:
    rec = record([rank(0, [0, 50 * MB], gone_s=9.9), rank(1, [0, 20 * MB], gone_s=3.0)], 0)
    said = findings(rec)
    assert [s for s in said if "ended at" in s] == [
        "TP1 (pid 1001) ended at 3.0 s while the server went on, after reading 20.00 MB from storage"
    ]


def test_ranks_that_end_with_the_server_are_not_named() -> None:
    rec = record([rank(0, [0, 50 * MB], gone_s=9.9), rank(1, [0, 50 * MB], gone_s=9.5)], 0, end="ready")
    assert not [s for s in findings(rec) if "ended at" in s]


def test_a_server_past_loading_is_said_only_when_nothing_was_read_all_was_resident_and_ranks_idle() -> None:
    def said(reads: list[int], resident: int, busy: float = 0.0, started_by_watch: bool = False) -> bool:
        rec = record(
            [rank(0, reads, busy=busy), rank(1, [50 * MB, 50 * MB], busy=0.0)], resident, end="timeout"
        )
        rec.started_by_watch = started_by_watch
        return any("already past loading" in s for s in findings(rec))

    assert said([50 * MB, 50 * MB], 100 * MB)
    assert not said([10 * MB, 50 * MB], 100 * MB)  # still reading
    assert not said([50 * MB, 50 * MB], 50 * MB)  # half the checkpoint not in memory
    assert not said([50 * MB, 50 * MB], 100 * MB, busy=0.6)  # a warm load: nothing fetched, but busy
    assert not said([50 * MB, 50 * MB], 100 * MB, started_by_watch=True)  # watched from its start


def test_read_amplification_counts_every_rank_against_the_checkpoint() -> None:
    rec = record([rank(0, [0, 100 * MB]), rank(1, [0, 100 * MB])], 0)
    assert rec.amplification() == 2.0
    assert any(s.startswith("read amplification 2.00x") for s in findings(rec))
    assert not any("amplification" in s for s in findings(record([rank(0, [0, 100 * MB])], 0)))


def test_the_view_has_a_line_per_rank_and_prints_plain_lines_off_a_terminal() -> None:
    rec = record([rank(0, [0, 10 * MB, 30 * MB]), rank(1, [0, 5 * MB])], 0, end="timeout")
    view = lines(rec, 2.0, "load-weights (target 3/8 shards)")
    assert (
        view[0]
        == "ckptprof watch: SGLang pid 1, 2.0 s, 2 rank processes; log: load-weights (target 3/8 shards)"
    )
    assert view[1].split()[:5] == ["TP0", "pid", "1000", "storage", "read"]
    assert (
        "( 20.00 MB/s)  syscr 10  majflt 1  cpu 60%" in view[1]
    )  # 10 -> 30 MB, 0.6 s of CPU in the last second
    assert view[3].startswith("  target /ckpt: 1 shards, 1 in page cache")
    assert view[4] == "  ranks read 35.00 MB from storage since they started = 0.35x the checkpoint"
    now = [0.0]
    out = io.StringIO()
    screen = Screen(out, clock=lambda: now[0], plain_every_s=5.0)
    screen.draw(["a"])
    now[0] = 1.0
    screen.draw(["b"])  # 1 s later: not yet
    now[0] = 6.0
    screen.draw(["c"])  # 6 s: printed
    assert out.getvalue() == "a\nc\n"


def test_a_py_spy_dump_is_read_thread_by_thread_past_a_multiline_header() -> None:
    from ckptprof.watch.stacks import parse_dump

    dump = (
        "Process 6053: /usr/bin/python -c \n"
        "    def inner():\n"  # the command line's own lines, indented like frames
        "Python v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 6053 (active+gil): "MainThread"\n'
        "    get_tensor (safetensors/torch.py:313)\n"
        "    load_weights (model.py:40)\n\n"
        'Thread 0x7F00AB (idle): "pin_memory"\n'
        "    wait (threading.py:320)\n"
    )
    threads = parse_dump(dump)
    assert [(t.tid, t.state, t.name) for t in threads] == [
        ("6053", "active+gil", "MainThread"),
        ("7F00AB", "idle", "pin_memory"),
    ]
    assert threads[0].frames == ("get_tensor (safetensors/torch.py:313)", "load_weights (model.py:40)")
