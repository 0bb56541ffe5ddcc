"""watch --py-spy: every thread's stack in a dump classified read / deserialize / copy / other by the run's own
py-spy classifier (ckptprof.analysis.stacks), per rank, kept in the session and shown in the view and the report.
A stand-in py-spy (a script that prints a canned dump) drives the sampler's real path."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from ckptprof.analysis.stacks import phase_of
from ckptprof.watch.session_file import rank_headers, rank_rows
from ckptprof.watch.stacks import (
    RankStacks,
    StackSampler,
    ThreadStack,
    classify,
    frame_file,
    frame_name,
    parse_dump,
    short_file,
    shorten,
)

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


def engine_tree(tmp_path: Path) -> Path:
    """A package laid out as SGLang 0.5.23's wheel is: sglang/ and model_loader/ hold an __init__.py, srt/ none."""
    loader = tmp_path / "site" / "sglang" / "srt" / "model_loader"
    loader.mkdir(parents=True)
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("")
    (loader / "__init__.py").write_text("")
    # line 2 reads a whole file, line 4 hands out a lazily mapped tensor
    (loader / "weight_utils.py").write_text(
        "def it(path):\n    state = load(open(path, 'rb').read())\n    with opened(path) as f:\n"
        "        yield f.get_tensor('w')\n"
    )
    return loader / "weight_utils.py"


def test_full_filenames_are_shortened_as_py_spy_does_and_their_lines_read(tmp_path: Path) -> None:
    source = engine_tree(tmp_path)
    dump = f"""\
Process 7: python -m sglang.launch_server
Python v3.11.7

Thread 7 (active): "MainThread"
    safetensors_weights_iterator ({source}:2)
    load_model (/opt/x/sglang/srt/model_loader/loader.py:380)
Thread 8 (active): "reader"
    safetensors_weights_iterator ({source}:4)
Thread 9 (idle): "pool"
    _worker (<frozen importlib._bootstrap>:81)
"""
    main, lazy, pool = shorten(parse_dump(dump))
    # What py-spy itself prints without --full-filenames (checked on the real SGLang 0.5.23 wheel), and the whole
    # path where the file is not there to walk (the rule reads whole paths too).
    assert main.frames == (
        "safetensors_weights_iterator (model_loader/weight_utils.py:2)",
        "load_model (/opt/x/sglang/srt/model_loader/loader.py:380)",
    )
    assert pool.frames == ("_worker (<frozen importlib._bootstrap>:81)",)
    assert short_file(str(source)) == "model_loader/weight_utils.py"
    # The iterator on a line that reads the file is the read; on the get_tensor line it is the deserialize.
    assert main.lines[0].endswith(".read())") and classify(main) == "read"
    assert classify(lazy) == "deserialize"
    # Without the lines (a py-spy without --full-filenames) the same frame is deserialize.
    assert classify(ThreadStack(main.tid, main.state, main.name, main.frames)) == "deserialize"


def test_the_sampler_asks_for_whole_paths_and_falls_back_without_them(tmp_path: Path) -> None:
    source = engine_tree(tmp_path)
    exe = tmp_path / "py-spy"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "import os\nif '--full-filenames' in sys.argv and os.path.basename(sys.argv[0]).startswith('old'):\n"
        "    sys.stderr.write(\"error: unexpected argument '--full-filenames' found\\n\"); sys.exit(2)\n"
        "path = "
        + repr(str(source))
        + " if '--full-filenames' in sys.argv else 'model_loader/weight_utils.py'\n"
        "sys.stdout.write('Thread 1 (active): \"MainThread\"\\n    safetensors_weights_iterator (' + path + ':2)\\n')\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    sampler = StackSampler(lambda: [1], exe=str(exe))
    sampler.dump(1)
    seen = sampler.stacks[1]
    assert seen.last == "safetensors_weights_iterator (model_loader/weight_utils.py:2)"
    assert dict(seen.classes) == {"read": 1}
    old = tmp_path / "old-py-spy"
    old.write_text(exe.read_text())
    old.chmod(exe.stat().st_mode)
    sampler = StackSampler(lambda: [1], exe=str(old))
    sampler.dump(1)  # refused: the flag is dropped for the next dumps
    sampler.dump(1)
    assert sampler.stacks[1].dumps == 1 and dict(sampler.stacks[1].classes) == {"deserialize": 1}
