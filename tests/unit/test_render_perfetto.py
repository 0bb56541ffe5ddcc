"""The Perfetto / Chrome trace: checked against the trace-event format, and loaded by Perfetto when it can."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ckptprof import api
from ckptprof.render import perfetto
from ckptprof.results import Verdict
from ckptprof.session import RankModel, RankResult, Session, ShardTiming

PHASES = {"X", "M", "C", "i"}
METADATA = {"process_name", "process_sort_index", "process_labels", "thread_name", "thread_sort_index"}


def validate_trace(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON object format as ui.perfetto.dev reads it; returns the events. Fails on the first violation."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    events = trace["traceEvents"]
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["name"], str) and e["name"], e
        assert isinstance(e["pid"], int) and e["pid"] > 0, e  # pid 0 is the idle task to viewers
        assert isinstance(e["tid"], int) and e["tid"] > 0, e
        if e["ph"] == "M":
            assert e["name"] in METADATA and isinstance(e["args"], dict), e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        if e["ph"] == "i":
            assert e.get("s") in ("g", "p", "t"), e
    json.dumps(trace, allow_nan=False)  # NaN / Infinity are not JSON: viewers reject the file
    return events


def assert_properly_nested(events: list[dict[str, Any]]) -> None:
    """On each track, X slices nest like a call stack: a child lies wholly inside its parent, none overlap.

    Times are float microseconds with 3 decimals; viewers work in whole nanoseconds, so 1 ns is the tolerance.
    """
    ns = 1e-3
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    for track, slices in tracks.items():
        stack: list[dict[str, Any]] = []
        for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - ns:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + ns, (
                    f"{track}: {e} overlaps {parent}"
                )
            stack.append(e)


def shard(
    file: str, start: float, wall: float, read: float, deser: float, h2d: float, **kw: Any
) -> ShardTiming:
    return ShardTiming(
        file=file, bytes=10**9, h2d_bytes=5 * 10**8, start_s=start, wall_s=wall,
        read_s=read, deserialize_s=deser, h2d_s=h2d, **kw,
    )  # fmt: skip


def two_model_session() -> Session:
    """Rank 0 loads target then draft; rank 1 died before reporting anything."""
    target = RankModel(
        role="target",
        start_s=0.0,
        wall_s=2.0,
        shards=[
            shard("t1", 0.0, 1.0, 0.6, 0.1, 0.2),
            shard("t2", 1.0, 1.0, 0.5, 0.1, 0.3, storage_bytes=10**9),
        ],
    )
    # CUDA event times can add up to more than the host's wall: the phases must still fit inside the shard
    draft = RankModel(role="draft", start_s=2.0, wall_s=0.5, shards=[shard("d1", 2.0, 0.5, 0.4, 0.1, 0.3)])
    return Session(
        config={"tp": 2},
        ranks=[
            RankResult(rank=0, device="cuda:0", host="node1", pid=4242, models=[target, draft]),
            RankResult(rank=1, device="cuda:1", status="failed", error="CUDA out of memory"),
        ],
        verdict=Verdict.from_dict({"bottleneck": "storage", "summary": "storage-bound: ..."}),
    )


def test_trace_has_a_process_per_rank_a_track_per_model_and_nested_phases() -> None:
    # GIVEN a rank with two models and a failed rank
    trace = json.loads(perfetto.render(two_model_session()))
    # WHEN the trace is checked against the format
    events = validate_trace(trace)
    assert_properly_nested(events)
    # THEN each rank is a named process, and rank 0 has one named thread per model
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {1: "rank 0 (cuda:0)", 2: "rank 1 (cuda:1) failed"}
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {1001: "target", 1002: "draft"}
    # AND no thread id repeats across ranks or equals a pid (importers key threads by tid alone)
    tids = {e["tid"] for e in events if e["ph"] == "X"}
    assert not tids & set(names)
    # AND the failed rank carries its error as an instant event
    assert any(e["ph"] == "i" and e["args"]["error"] == "CUDA out of memory" for e in events)


def test_shard_and_phase_slices_carry_bytes_rates_and_microsecond_times() -> None:
    # GIVEN the two-model session WHEN rendered
    events = validate_trace(perfetto.trace(two_model_session()))
    t2 = next(e for e in events if e["ph"] == "X" and e["name"] == "t2")
    # THEN a shard starts at its start_s and lasts its wall, in microseconds, with its numbers in args
    assert (t2["ts"], t2["dur"]) == (1e6, 1e6)
    assert t2["args"]["bytes"] == 10**9 and t2["args"]["GB/s"] == 1.0
    assert t2["args"]["storage_bytes"] == 10**9 and t2["args"]["status"] == "ok"
    assert {"major_faults"} <= set(t2["args"])
    # AND its phases follow one another from the shard's start, at their measured lengths
    phases = [e for e in events if e.get("cat") == "phase" and t2["ts"] <= e["ts"] < t2["ts"] + t2["dur"]]
    assert [(p["name"], p["ts"], p["dur"]) for p in phases] == [
        ("read", 1e6, 0.5e6),
        ("deserialize", 1.5e6, 0.1e6),
        ("h2d", 1.6e6, 0.3e6),
    ]
    h2d = phases[-1]
    assert h2d["args"]["GB/s"] == pytest.approx(0.5 / 0.3, rel=1e-3)


def test_phases_longer_than_the_wall_are_scaled_into_the_shard() -> None:
    # GIVEN a shard whose phases sum to 0.8 s in a 0.5 s wall
    segments = perfetto.phase_segments(shard("d1", 2.0, 0.5, 0.4, 0.1, 0.3))
    # THEN they are drawn back to back and end exactly at the shard's end
    assert segments[0][1] == 2.0
    end = segments[-1][1] + segments[-1][2]
    assert end == pytest.approx(2.5)
    assert [round(s[2] / 0.5 * 0.8, 6) for s in segments] == [0.4, 0.1, 0.3]


def test_throughput_counters_step_per_shard_and_return_to_zero() -> None:
    events = perfetto.trace(two_model_session())["traceEvents"]
    counters = [e for e in events if e["ph"] == "C" and e["pid"] == 1]
    # GIVEN 3 shards in 2 models THEN one value per shard and a zero at the end of each model
    assert len(counters) == 5
    assert [c["args"]["materialised"] for c in counters] == [1.0, 1.0, 0, 2.0, 0]
    assert counters[1]["args"]["from storage"] == 1.0


@pytest.fixture(scope="module")
def real_trace(small_draft: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    session = api.replay(small_draft, tp=2, probe=False)
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    path.write_text(perfetto.render(session))
    return path


def test_a_real_session_gives_a_valid_trace(real_trace: Path) -> None:
    # GIVEN a real 2-rank replay of an 8-shard draft
    events = validate_trace(json.loads(real_trace.read_text()))
    assert_properly_nested(events)
    # THEN both ranks are there with a slice per shard and the phases inside
    shards = [e for e in events if e.get("cat") == "shard"]
    assert len(shards) == 2 * 8
    assert {e["pid"] for e in shards} == {1, 2}
    assert any(e.get("cat") == "phase" and e["name"] == "h2d" for e in events)


def test_perfetto_trace_processor_loads_it(real_trace: Path) -> None:
    """Perfetto's own parser, wherever a local trace processor binary is: CKPTPROF_TRACE_PROCESSOR or on PATH.

    No package registry ships that binary (the perfetto package downloads it at run time, and the test never
    reaches out to the network), so CI, which has no network, cannot run this check: it runs where one is installed.
    """
    binary = os.environ.get("CKPTPROF_TRACE_PROCESSOR") or next(
        filter(None, map(shutil.which, ("trace_processor_shell", "trace_processor"))), None
    )
    if not binary:
        pytest.skip("no trace_processor_shell on PATH nor in CKPTPROF_TRACE_PROCESSOR")
    tp_module = pytest.importorskip("perfetto.trace_processor")
    config = tp_module.TraceProcessorConfig(bin_path=binary, load_timeout=20)
    try:
        processor = tp_module.TraceProcessor(trace=str(real_trace), config=config)
    except Exception as exc:  # offline: the binary cannot be fetched; that says nothing about the trace
        pytest.skip(f"Perfetto trace processor cannot start here: {type(exc).__name__}: {exc}")
    try:
        slices = list(processor.query("select count(*) as n from slice where category = 'shard'"))
        assert slices[0].n == 16
        names = sorted(r.name for r in processor.query("select name from process where name like 'rank %'"))
        assert names == ["rank 0 (cpu)", "rank 1 (cpu)"]
        errors = list(processor.query("select name, value from stats where severity = 'error' and value > 0"))
        assert not errors, [(e.name, e.value) for e in errors]
    finally:
        processor.close()
