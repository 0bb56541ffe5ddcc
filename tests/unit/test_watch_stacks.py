"""watch --py-spy: every thread's stack in a dump classified read / deserialize / copy / other by the run's own
py-spy classifier (ckptprof.analysis.stacks), per rank, kept in the session and shown in the view and the report.
A stand-in py-spy (a script that prints a canned dump) drives the sampler's real path."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from ckptprof.analysis.stacks import phase_of
from ckptprof.watch.session_file import rank_headers, rank_rows
from ckptprof.watch.stacks import RankStacks, StackSampler, classify, frame_file, frame_name, parse_dump

# A server rank in the middle of a load: its main thread copying a tensor in, a reader thread faulting pages in,
# one deserialising (safetensors.torch.load's frame as a real py-spy 0.4.3 dump shows it: get_tensor and safe_open
# are Rust and never appear), one idle pool thread (no loading step on its stack).
DUMP = """\
Process 4242: sglang::scheduler_TP0
Python v3.11.7 (/usr/bin/python3.11)

Thread 4242 (active): "MainThread"
    copy (ckptprof/loader/copying.py:88)
    load_weights (sglang/srt/models/llama.py:501)
    load_model (sglang/srt/model_loader/loader.py:380)
    <module> (sglang/launch_server.py:14)
Thread 0x7F001 (active): "reader"
    fault_in (ckptprof/loader/pages.py:40)
    _load_shard (ckptprof/loader/worker.py:120)
Thread 0x7F002 (idle): "deser"
    load (safetensors/torch.py:386)
    load_model (sglang/srt/model_loader/loader.py:380)
Thread 0x7F003 (idle): "pool"
    _worker (concurrent/futures/thread.py:81)
    run (threading.py:982)
"""


def fake_py_spy(tmp_path: Path) -> str:
    exe = tmp_path / "py-spy"
    (tmp_path / "dump.txt").write_text(DUMP)
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(tmp_path / 'dump.txt')!r}).read())\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_each_thread_is_classified_as_the_runs_classifier_classifies_it() -> None:
    threads = parse_dump(DUMP)
    assert [classify(t) for t in threads] == ["copy", "read", "deserialize", None]
    # The deserialising thread is told by its frame's file: "load" alone names no step.
    assert phase_of([frame_name(f) for f in reversed(threads[2].frames)]) == "other"
    for t in threads:  # the very rule of the run's py-spy sampling (its h2d is watch's copy)
        run = phase_of(
            [frame_name(f) for f in reversed(t.frames)], [frame_file(f) for f in reversed(t.frames)]
        )
        assert classify(t) == {"h2d": "copy"}.get(run or "", run)


def test_the_sampler_keeps_per_rank_classes_and_shares(tmp_path: Path) -> None:
    sampler = StackSampler(lambda: [4242], exe=fake_py_spy(tmp_path))
    sampler.dump(4242)
    sampler.dump(4242)
    seen = sampler.stacks[4242]
    assert seen.dumps == 2 and seen.last == "copy (ckptprof/loader/copying.py:88)"
    assert dict(seen.classes) == {"copy": 2, "read": 2, "deserialize": 2}
    assert seen.unclassified == 2
    assert seen.shares() == {"read": 0.333, "deserialize": 0.333, "copy": 0.333}


def test_the_shares_reach_the_session_the_view_and_the_report() -> None:
    from ckptprof.watch.counters import ProcCounters
    from ckptprof.watch.procs import RankProcess, classify_process
    from ckptprof.watch.record import RankTrack, WatchRecord
    from ckptprof.watch.view import rank_line

    stacks = RankStacks()
    stacks.add(parse_dump(DUMP))
    stacks.add(parse_dump(DUMP.replace("copy (ckptprof", "fault_in (ckptprof")))  # main thread reading now
    role = classify_process("sglang::schedul", ["sglang::scheduler_TP0"])
    assert role is not None
    c = ProcCounters(0.0, 0, 0, 0, 0, 0.0, 0.0, 1, 1)
    track = RankTrack(RankProcess(4242, role, 0.0), 0.0, c, c, [c, c], stacks=stacks)
    record = WatchRecord(
        pid=1, command=[], started_by_watch=True, interval_s=0.5, started_at="t", ranks=[track]
    )
    doc = record.to_dict()
    saved = doc["ranks"][0]["stacks"]
    assert saved["classes"] == {"read": 3, "deserialize": 2, "copy": 1, "other": 0}
    assert saved["class_shares"] == {"read": 0.5, "deserialize": 0.333, "copy": 0.167}
    assert saved["unclassified"] == 2
    assert "stacks read 50% deserialize 33% copy 17%" in rank_line(track)
    assert rank_headers(doc)[-1] == "py-spy stacks"
    assert rank_rows(doc)[0][-1] == "read 50% deserialize 33% copy 17% of 6 stacks (+2 unclassified)"
