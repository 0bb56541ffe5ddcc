"""vLLM V1's KV cache step as its processes log it: each worker ends its memory profile with `Available KV cache
memory` (v1/worker/gpu_worker.py, 0.8 to 0.34), then the engine's process sizes the cache for all of them with
`GPU KV cache size` (v1/core/kv_cache_utils.py). First seen wrong on an AMD toolbox's paste cut between the two
(vllm-amd-strix-halo-vllm-toolboxes-5, batch 8)."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

WORKERS = b"".join(
    b"(VllmWorker rank=%d pid=%d) INFO 07-21 19:37:%02d [default_loader.py:262] Loading weights took 4.10 seconds\n"
    % (rank, 3249 + rank, 6 + rank % 2)
    for rank in range(4)
)
AVAILABLE = b"".join(
    b"(VllmWorker rank=%d pid=%d) INFO 07-21 19:37:30 [gpu_worker.py:232] Available KV cache memory: 12.79 GiB\n"
    % (rank, 3249 + rank)
    for rank in range(4)
)
SIZED = (
    b"INFO 07-21 19:37:31 [kv_cache_utils.py:716] GPU KV cache size: 279,408 tokens\n"
    b"INFO 07-21 19:37:31 [kv_cache_utils.py:720] Maximum concurrency for 16,384 tokens per request: 17.05x\n"
)


def _phase(log: bytes, name: str) -> tuple[int, float | None]:
    (phase,) = [p for p in analyze_bytes(log).phases if p.name == name]
    return phase.ranks, phase.seconds


def test_a_log_cut_after_the_workers_profile_is_sizing_the_kv_cache() -> None:
    # GIVEN four workers that loaded their weights and finished profiling, and no size line yet
    report = analyze_bytes(WORKERS + AVAILABLE)
    # THEN the KV cache step is the one under way, on the four workers, since their loads ended
    assert report.state == "kv-cache"
    assert [(p.name, p.model) for p in report.phases] == [("load-weights", "target"), ("kv-cache", "target")]
    assert _phase(WORKERS + AVAILABLE, "kv-cache") == (4, 24.0)


def test_the_engines_size_line_ends_every_workers_step_and_adds_no_rank() -> None:
    # GIVEN the same, then the engine's process sizes the cache (and says it again, as 0.9 does per KV group)
    log = WORKERS + AVAILABLE + SIZED + SIZED
    report = analyze_bytes(log)
    # THEN the step ended for the four workers at the size line; the engine's process is not a fifth rank of it
    assert _phase(log, "kv-cache") == (4, 25.0)
    assert not any(p.name == "kv-cache" and p.end is None for p in report.phases)
    assert not any("never logged" in warning for warning in report.warnings)


def test_a_size_line_alone_still_ends_the_step_it_implies() -> None:
    # GIVEN an excerpt without the workers' profile lines (V0, or an engine that logs nothing per worker)
    log = WORKERS + SIZED
    # THEN the step runs from the last load's end to the size line, on the engine's process, as before
    assert _phase(log, "kv-cache") == (1, 24.0)


def test_one_process_that_profiles_and_sizes_ends_its_own_step() -> None:
    # GIVEN V1 with one GPU: the engine's process is the worker, and logs both lines (the toolbox's form)
    tag = b"(EngineCore_0 pid=3856547) INFO 10-26 21:4"
    log = (
        tag + b"7:45 [default_loader.py:267] Loading weights took 1.27 seconds\n"
        + tag + b"8:00 [gpu_worker.py:276] Available KV cache memory: 18.38 GiB\n"
        + tag + b"8:01 [kv_cache_utils.py:1087] GPU KV cache size: 796,000 tokens\n"
    )  # fmt: skip
    # THEN its step ran from its load's end to the size line, and nothing is left running
    report = analyze_bytes(log)
    (step,) = [p for p in report.phases if p.name == "kv-cache"]
    assert (step.ranks, step.seconds, step.end) == (1, 16.0, "10-26 21:48:01")
