"""SGLang 0.5.2x's `Engine startup timings (s): load_weight=..., kv_cache_allocation=..., cuda_graph={...}, ...`
(entrypoints/engine.py, once the schedulers are up): the engine's own account of its steps, reported as stated.

Checked on the real logs that hold it: a v0.5.21 tail that holds no step record (the line is all it says of the
load), and a dev build's 3-node boot whose two weight loads the line sums."""

from __future__ import annotations

import json
from pathlib import Path

from ckptprof.bootlog import analyze_bytes, analyze_path
from ckptprof.bootlog.actions import startup_timings
from ckptprof.cli.log_cmd import render_text

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


def test_a_tail_with_no_step_record_still_says_what_the_engine_timed() -> None:
    """GIVEN the tail of a v0.5.21 boot (no begin or end record, the timings line and uvicorn's) WHEN it is read
    THEN the report carries each stated step, the JSON too, and the text says them, graph passes that took no time
    left out."""
    report = analyze_path(str(REAL / "sglang-teleduct-gptoss20b-l4-v0521-tail.log"))
    assert report.startup_timings == {
        "load_weight": 154.93,
        "kv_cache_allocation": 0.44,
        "scheduler_e2e": 243.89,
        "cuda_graph.prefill": 64.55,
        "cuda_graph.decode": 4.58,
        "cuda_graph.target_verify": 0.0,
        "cuda_graph.draft_prefill": 0.0,
        "cuda_graph.draft_decode": 0.0,
        "cuda_graph.draft_extend": 0.0,
        "tokenizer_e2e": 257.64,
    }
    assert json.loads(json.dumps(report.to_dict()))["startup_timings"]["load_weight"] == 154.93
    text = render_text(report, "tail.log")
    assert (
        "startup timings the engine states: load_weight 154.93 s, kv_cache_allocation 0.44 s, scheduler_e2e 243.89 s,"
        " cuda_graph (prefill 64.55 s, decode 4.58 s), tokenizer_e2e 257.64 s"
    ) in text
    assert [phase.name for phase in report.phases] == ["ready"]  # a summary line opens no step


def test_the_stated_load_is_the_sum_of_the_loads_the_reader_found() -> None:
    """GIVEN a boot whose rank loads the target, then a DSpark draft (two `Load weight end. elapsed=`) WHEN it is read
    THEN the engine's load_weight is those two stated loads together: the line and the records agree."""
    report = analyze_path(str(REAL / "sglang-lecywza-dsv41-3spark-tp3-dspark.log"))
    loads = [phase for phase in report.phases if phase.name == "load-weights"]
    assert [phase.model for phase in loads] == ["target", "draft"] and all(phase.stated for phase in loads)
    assert (
        round(sum(phase.seconds or 0.0 for phase in loads), 2)
        == report.startup_timings["load_weight"]
        == 616.34
    )
    assert (
        report.startup_timings["cuda_graph.target_verify"] == 13.48
    )  # the phase table's target verify graphs


def test_a_boot_without_the_line_states_nothing() -> None:
    log = (
        b"[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
        b"[2026-01-01 00:00:09 TP0] Load weight end. elapsed=9.00 s, type=LlamaForCausalLM, avail mem=60.00 GB\n"
    )
    report = analyze_bytes(log)
    assert report.startup_timings == {} and report.to_dict()["startup_timings"] == {}
    assert "startup timings" not in render_text(report, "x.log")


def test_groups_and_odd_values_are_read_as_written() -> None:
    assert startup_timings("load_weight=1.50, cuda_graph={decode=2.25, prefill=0.00}, tokenizer_e2e=3") == {
        "load_weight": 1.5,
        "cuda_graph.decode": 2.25,
        "cuda_graph.prefill": 0.0,
        "tokenizer_e2e": 3.0,
    }
    assert startup_timings("load_weight=nan, kv_cache_allocation=") == {}
    assert startup_timings("cuda_graph={}") == {}


def test_a_later_boot_has_its_own_timings() -> None:
    """GIVEN two boots in one file, only the first stating its timings WHEN the last is reported THEN it states none."""
    first = (
        b"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1)\n"
        b"[2026-01-01 00:00:01 TP0] Load weight begin. avail mem=70.00 GB\n"
        b"[2026-01-01 00:00:09 TP0] Load weight end. elapsed=8.00 s, type=LlamaForCausalLM, avail mem=60.00 GB\n"
        b"[2026-01-01 00:00:10] Engine startup timings (s): load_weight=8.00, kv_cache_allocation=0.10\n"
    )
    second = first.replace(b" 00:00:", b" 01:00:").replace(
        b"[2026-01-01 01:00:10] Engine startup timings (s): load_weight=8.00, kv_cache_allocation=0.10\n", b""
    )
    assert analyze_bytes(first).startup_timings == {"load_weight": 8.0, "kv_cache_allocation": 0.1}
    report = analyze_bytes(first + second)
    assert report.boots == 2 and report.startup_timings == {}
