"""The engine's own account of its steps, reported as stated: SGLang 0.5.2x's `Engine startup timings (s):
load_weight=..., kv_cache_allocation=..., cuda_graph={...}, ...` (entrypoints/engine.py, once the schedulers are up),
and vLLM's torch.compile and engine-init lines (compilation/monitor.py, v1/engine/core.py).

Checked on the real logs that hold them: a v0.5.21 tail that holds no step record (the line is all it says of the
load), a dev build's 3-node boot whose two weight loads the line sums, a vLLM file of three EAGLE-3 boots whose
per-model compile lines add up to the compilation time the engine's init line states, and a boot where the two
differ (the engine's is its own sum of compile times, not the monitor's wall time)."""

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


def test_vllm_s_compile_lines_add_up_per_rank() -> None:
    """GIVEN a 0.2x vLLM's boots, each compile on its own line ("torch.compile took 3.79 s in total" for the target,
    0.22 s for the EAGLE-3 drafter) and the engine's init line with its "(compilation: 4.01 s)" WHEN each boot is read
    THEN torch_compile is the sum (here what the engine states too), init_engine and compilation as stated; the third
    boot, which crashed before its init line, states its compiles alone."""
    path = str(REAL / "vllm-eagle3-spec-dec-3boots-speculator-crash.log")
    assert analyze_path(path, boot=1).startup_timings == {
        "torch_compile": 4.01,
        "init_engine": 24.04,
        "compilation": 4.01,
    }
    assert analyze_path(path, boot=2).startup_timings == {
        "torch_compile": 5.61,
        "init_engine": 10.84,
        "compilation": 5.61,
    }
    assert analyze_path(path).startup_timings == {"torch_compile": 5.74}


def test_the_engine_s_compilation_is_its_own_figure_not_the_monitor_s() -> None:
    """GIVEN a Gemma 4 EAGLE-3 boot whose worker times its two compiles at 61.09 s and 6.05 s while the engine's init
    line states "(compilation: 59.75 s)" (Dynamo's 11.21 + 0.49 s and the backend's 42.88 + 5.16 s) WHEN read THEN
    both are reported as stated, neither made to match the other; an excerpt holding only the init line still states
    its compilation."""
    report = analyze_path(str(REAL / "vllm-DockerBuildFiles-gemma4-26b-eagle3-wsl-ready.log"))
    assert report.startup_timings == {"torch_compile": 67.14, "init_engine": 102.61, "compilation": 59.75}
    excerpt = analyze_path(str(REAL / "vllm-vllm-windows-build-4.log"))
    assert excerpt.startup_timings == {"init_engine": 13.7, "compilation": 7.28}


def test_vllm_s_compile_is_said_to_sit_inside_the_kv_cache_phase() -> None:
    """GIVEN vLLM 0.15.1 at TP2 whose kv-cache phase (43 s, from the load's end) holds its 33.21 s torch.compile
    WHEN the text report is written THEN it states both timings and says where the compile's time went."""
    report = analyze_path(str(REAL / "vllm-activate-rag-gptoss-harmony-fail.log"))
    assert report.startup_timings == {
        "torch_compile": 33.21,
        "init_engine": 177.74,
    }  # 0.15.1: no "(compilation"
    kv = next(phase for phase in report.phases if phase.name == "kv-cache")
    assert kv.seconds is not None and kv.seconds >= report.startup_timings["torch_compile"]
    text = render_text(report, "vllm.out")
    assert "startup timings the engine states: torch_compile 33.21 s, init_engine 177.74 s\n" in text
    assert "a kv-cache phase that began at the load's end holds the compile's time" in text


def test_vllm_s_running_total_is_kept_per_rank_and_the_slowest_rank_wins() -> None:
    """GIVEN two workers of an older vLLM, each stating its running total ("takes N s in total") twice, and a copy
    with a paste's bold WHEN read THEN each rank's last total counts, not their sum, and the slower rank's is kept."""
    log = (
        b"(VllmWorker rank=0 pid=1) INFO 01-01 00:00:05 [monitor.py:33] torch.compile takes 4.50 s in total\n"
        b"(VllmWorker rank=1 pid=2) INFO 01-01 00:00:05 [monitor.py:33] torch.compile takes 5.00 s in total\n"
        b"(VllmWorker rank=0 pid=1) INFO 01-01 00:00:09 [monitor.py:33] torch.compile takes 6.25 s in total\n"
        b"(VllmWorker rank=1 pid=2) INFO 01-01 00:00:09 [monitor.py:33] torch.compile takes **6.00 s** in total\n"
        b"INFO 01-01 00:00:30 [core.py:61] init engine (profile, create kv cache, warmup model) took 30.5 seconds\n"
    )
    assert analyze_bytes(log).startup_timings == {"torch_compile": 6.25, "init_engine": 30.5}
    # a line cut before its unit states nothing (vllm#16961's "took 11629.91")
    cut = b"INFO 04-21 22:58:22 [core.py:162] init engine (profile, create kv cache, warmup model) took 11629.91\n"
    assert analyze_bytes(cut).startup_timings == {}
