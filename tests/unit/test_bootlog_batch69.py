"""Batch 69 (reports/cpu/2026-12-07n-bootlog-unseen): what its misses taught the reader.

- A vLLM API server whose stdout alone was saved (uvicorn's `Application startup complete` went to stderr) says it came
  up (`Starting vLLM server on ...`) and then serves: it was up from that line, a ready step.
- vLLM 0.23 logs the drafter's load on rank 0 alone, while every worker logs that the drafter shares the target's
  embedding: those lines count no rank in the draft's load once a rank's load is in the log.
- SGLang's bench_one_batch prints its batches' latencies after the boot, with no ready line: an offline run, ready.
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"

API = "(APIServer pid=10) INFO 07-16 20:04:15 "
ENGINE = (
    "(EngineCore pid=11) INFO 07-16 20:03:00 [gpu_model_runner.py:5248] Starting to load model m...\n"
    "(EngineCore pid=11) INFO 07-16 20:03:40 [default_loader.py:535] Loading weights took 40.00 seconds\n"
    "(EngineCore pid=11) INFO 07-16 20:04:12 [core.py:340] init engine (profile, create kv cache, warmup model) "
    "took 30.00 s\n"
)
UP = f"{API}[api_server.py:677] Starting vLLM server on http://0.0.0.0:8000\n{API}[launcher.py:37] Available routes are:\n"
SERVING = (
    "(APIServer pid=10) INFO 07-16 20:05:25 [loggers.py:259] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
    "Avg generation throughput: 30.1 tokens/s, Running: 1 reqs\n"
)


def _phases(log: str) -> list[tuple[str, str | None, str | None]]:
    return [(p.name, p.start, p.end) for p in analyze_bytes(log.encode()).phases]


def test_a_server_that_came_up_then_served_was_ready_from_its_up_line() -> None:
    report = analyze_bytes((ENGINE + UP + SERVING).encode())
    assert report.state == "ready"
    ready = [p for p in report.phases if p.name == "ready"]
    assert [(p.start, p.end) for p in ready] == [("07-16 20:03:40", "07-16 20:04:15")]
    assert report.summary.startswith("ready: its HTTP server came up")
    assert "its ready line is not in the log" in report.summary


def test_a_server_seen_serving_with_no_up_line_has_no_ready_step() -> None:
    # GIVEN the same with no `Starting vLLM server on`: nothing says when it came up
    report = analyze_bytes((ENGINE + SERVING).encode())
    assert report.state == "ready"
    assert "ready" not in [p.name for p in report.phases]
    assert "no line in the log says when it came up" in report.summary


def test_a_log_that_ends_at_the_up_line_is_up() -> None:
    report = analyze_bytes((ENGINE + UP).encode())
    assert report.state == "ready"
    assert [p.name for p in report.phases][-1] == "ready"


def test_a_log_that_goes_on_after_the_up_line_without_serving_is_not_ready() -> None:
    # GIVEN the up line, then the engine dies: no ready
    died = "(EngineCore pid=11) ERROR 07-16 20:04:20 [core.py:1330] EngineCore failed to start.\n"
    report = analyze_bytes((ENGINE + UP + died).encode())
    assert report.state != "ready"


def test_the_real_stdout_only_server_is_ready_with_a_ready_step() -> None:
    log = REAL / "vllm-jupiter-glm52-w4a16-v0231rc1-tp4-ep-gpfs-uva-offload-aot-recompile-ready.log"
    report = analyze_bytes(log.read_bytes())
    assert report.state == "ready" and report.phases[-1].name == "ready"


WORKER = "(Worker_TP{rank}_EP{rank} pid=2{rank}) INFO 07-18 {clock} "
DRAFTER = (
    WORKER.format(rank=0, clock="11:03:46")
    + "[gpu_model_runner.py:5272] Loading drafter model...\n"
    + WORKER.format(rank=0, clock="11:04:05")
    + "[default_loader.py:535] Loading weights took 18.35 seconds\n"
    + "".join(
        WORKER.format(rank=rank, clock="11:04:13")
        + "[llm_base_proposer.py:1475] Detected MTP model. Sharing target model embedding weights with the draft model.\n"
        for rank in (2, 1, 0, 3)
    )
)


def test_workers_sharing_the_targets_embedding_join_no_draft_load_rank_0_logged() -> None:
    # GIVEN rank 0's drafter load, then all four workers' sharing lines
    report = analyze_bytes(DRAFTER.encode())
    (draft,) = [p for p in report.phases if (p.name, p.model) == ("load-weights", "draft")]
    # THEN the draft's load is rank 0's, ended: the other workers' lines leave nothing running
    assert (draft.ranks, draft.seconds, draft.end) == (1, 18.35, "07-18 11:04:05")


def test_a_sharing_line_alone_still_says_the_drafters_load_is_under_way() -> None:
    # GIVEN an excerpt cut below `Loading drafter model...`: a worker's sharing line is all there is of the draft's load
    log = DRAFTER.splitlines(keepends=True)[3]
    phases = [(p.name, p.model) for p in analyze_bytes(log.encode()).phases]
    assert phases == [("load-weights", "draft")]


BENCH = REAL / "sglang-obsidian-bench-one-batch-lfm2-700m-triton-conv-cache-graph-end-benchmark.log"


def test_a_bench_one_batch_run_is_an_offline_run_that_served() -> None:
    report = analyze_bytes(BENCH.read_bytes())
    assert report.state == "ready"
    assert report.summary.startswith("ready: the engine is serving prompts (an offline run)")


def test_a_bench_one_batch_cut_before_its_batches_is_not_ready() -> None:
    lines = BENCH.read_bytes().split(b"\n")
    cut = next(i for i, line in enumerate(lines) if line.startswith(b"Prefill. latency"))
    report = analyze_bytes(b"\n".join(lines[:cut]))
    assert report.state == "cuda-graph"
