"""vLLM from 0.11.1 logs its load, KV-memory and graph records with ``info_once``: `Starting to load model` by global
rank 0 alone, `Loading weights took`, `Model loading took`, `Available KV cache memory` and `Graph capturing finished`
by each node's first local rank (vllm/logger.py: the scope's default became "local" in 0.19; 0.11.1-0.18 name it at
the call). The other ranks' silence is how the release logs, not ranks that missed the step: no warning names them,
and a step under way is not awaited on them. Records that every rank logs (V0's workers' `Loading model weights took`,
SGLang's) still name the ranks that did not log them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.bootlog import analyze_bytes, analyze_path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"

# Ready vLLM boots posted publicly, TP2 to TP8 on one node and Ray over several, whose phases only rank 0 (or each
# node's first rank) logged: each was read with "not logged by TP1 ..." warnings before.
READY_ONE_RANK_LOGS = (
    "vllm-agentic-ai-eks-qwen72b-tp4",
    "vllm-discoverphysicswip-qwen36-27b-tp2-ready",
    "vllm-gdscoldstarts-mistral-large-awq-a100x8-tp8-runai",
    "vllm-kagaho-llama3-70b-awq-l40s-tp2",
    "vllm-multi-node-inference-isambard-qwen3-30b-pp2-tp4-ray-bench",
    "vllm-prograph-qwen3-30b-a3b-tp2",
    "vllm-triton-example-rocm-mi300x-minimax-tp4-ready",
    "vllm-videocuttingagent-slurm-qwen3vl-tp2-timelimit",
    "vllm-vllm-benchmarking-gptoss120b-tp4-4node-ray-ready",
)


@pytest.mark.parametrize("name", READY_ONE_RANK_LOGS)
def test_ranks_that_vllm_keeps_quiet_are_not_warned_about(name: str) -> None:
    report = analyze_path(str(REAL / f"{name}.log"))
    assert report.framework == "vllm" and report.ready
    assert not [warning for warning in report.warnings if "not logged by" in warning], report.warnings


def test_the_tp2_boot_shows_its_load_as_rank_0_logged_it() -> None:
    """GIVEN vLLM TP2 (a 0.2x runner: TP1 logs its world and its prefetch, nothing of the load) WHEN it is read THEN
    the load is rank 0's stated 62.45 s, logged by one rank, and no warning is left."""
    report = analyze_path(str(REAL / "vllm-discoverphysicswip-qwen36-27b-tp2-ready.log"))
    load = next(phase for phase in report.phases if phase.name == "load-weights")
    assert (load.seconds, load.stated, load.ranks) == (62.45, True, 1)
    assert report.warnings == ()


CONFIG = b"INFO 03-08 20:37:30 [core.py:93] Initializing a V1 LLM engine (v0.20.0) with config: model='m', tensor_parallel_size=2\n"


def _worker(rank: int, second: int, message: str) -> bytes:
    return f"(Worker_TP{rank} pid={100 + rank}) INFO 03-08 20:37:{second:02d} [x.py:1] {message}\n".encode()


def _world(rank: int) -> bytes:
    return _worker(
        rank, 31, f"world_size=2 rank={rank} local_rank={rank} distributed_init_method=tcp://h:1 backend=nccl"
    )


def test_a_step_under_way_is_awaited_only_where_it_is_logged() -> None:
    """GIVEN a TP2 boot cut while rank 0 loads (TP1 logged its world, then only what every rank logs) WHEN it is
    read THEN the load's end is awaited on rank 0 alone, not on '1 of 2 ranks'."""
    log = (
        CONFIG
        + _world(0)
        + _world(1)
        + _worker(0, 35, "Starting to load model m...")
        + _worker(1, 36, "Using FlashAttention version 2")
    )
    report = analyze_bytes(log)
    assert report.state == "load-weights"
    assert "`Loading weights took` not yet logged" in report.summary
    assert "of 2 ranks" not in report.summary, report.summary


def test_the_next_step_started_by_rank_0_alone_leaves_no_warning_for_the_load() -> None:
    log = (
        CONFIG
        + _world(0)
        + _world(1)
        + _worker(0, 35, "Starting to load model m...")
        + _worker(0, 45, "Loading weights took 9.50 seconds")
        + _worker(0, 46, "Model loading took 12.0 GiB memory and 10.2 seconds")
        + _worker(0, 50, "Available KV cache memory: 50.0 GiB")
    )
    report = analyze_bytes(log)
    assert report.state == "kv-cache"
    assert not [warning for warning in report.warnings if "not logged by" in warning], report.warnings


def test_a_record_every_rank_logs_still_names_the_rank_that_did_not() -> None:
    """GIVEN vLLM V0 over Ray TP3 (each worker logs its own `Loading model weights took`), one worker's load not in
    the log although it went on to its graphs WHEN it is read THEN the warning names it: that end is every rank's to
    log, whatever the begin beside it (`Starting to load model`, one rank's in later releases) says."""
    log = (
        b"INFO 05-01 10:00:00 llm_engine.py:100] Initializing an LLM engine (v0.5.4) with config: model='m', "
        b"tensor_parallel_size=3\n"
        b"INFO 05-01 10:00:05 model_runner.py:720] Starting to load model m...\n"
        b"(RayWorkerWrapper pid=201) INFO 05-01 10:00:05 model_runner.py:720] Starting to load model m...\n"
        b"INFO 05-01 10:00:20 model_runner.py:732] Loading model weights took 7.50 GB\n"
        b"(RayWorkerWrapper pid=201) INFO 05-01 10:00:20 model_runner.py:732] Loading model weights took 7.50 GB\n"
        b"INFO 05-01 10:00:25 gpu_executor.py:102] # GPU blocks: 1000, # CPU blocks: 200\n"
        b"INFO 05-01 10:00:30 model_runner.py:1000] Capturing the model for CUDA graphs.\n"
        b"(RayWorkerWrapper pid=201) INFO 05-01 10:00:30 model_runner.py:1000] Capturing the model for CUDA graphs.\n"
        b"(RayWorkerWrapper pid=202) INFO 05-01 10:00:30 model_runner.py:1000] Capturing the model for CUDA graphs.\n"
    )
    report = analyze_bytes(log)
    assert report.framework == "vllm" and report.state == "cuda-graph"
    assert "load-weights (target): not logged by pid202 (1 of 2 ranks)" in report.warnings, report.warnings
