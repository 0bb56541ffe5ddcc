"""Which frame of a traceback names the step a process died in.

The innermost frame a table knows names it, with two limits (batch 69):
- a frame known only by its module's path (`model_loader/`, `cuda_graph_runner.py`) does not overrule a function's
  frame above it: a fork's `model_loader/tiered_moe_kv.py` sized the KV cache under `_initialize_kv_caches`;
- a needle that names a whole function matches only that function: vLLM's `in init_device` is not SGLang's
  `in init_device_graphs`.
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
TIERED = REAL / "vllm-jupiter-glm52-w4a16-v0231rc1-tp4-ep-tiered-kv-spec-valueerror.log"

HEAD = "(EngineCore pid=7) ERROR 07-17 13:44:01 [core.py:1330] "
LOADED = (
    "(Worker_TP0 pid=8) INFO 07-17 13:34:44 [gpu_model_runner.py:1953] Starting to load model m...\n"
    "(Worker_TP0 pid=8) INFO 07-17 13:42:29 [default_loader.py:502] Loading weights took 458.57 seconds\n"
)


def _traceback(*frames: str, error: str = "ValueError: no specs") -> str:
    lines = ["Traceback (most recent call last):"]
    for path, function in (frame.split(" in ") for frame in frames):
        lines += [f'  File "/usr/lib/python3/vllm/{path}", line 1, in {function}', "    call()"]
    return "".join(f"{HEAD}{line}\n" for line in [*lines, error])


def test_a_path_frame_below_a_kv_cache_function_is_the_kv_cache() -> None:
    # GIVEN a load that ended, then the engine's traceback through _initialize_kv_caches into a module under
    # model_loader/ (a fork's helper that sizes the KV cache)
    log = LOADED + _traceback(
        "v1/engine/core.py in _initialize_kv_caches",
        "model_executor/model_loader/tiered_moe_kv.py in get_tiered_kv_available_memory",
    )
    # THEN it failed sizing the KV cache, not loading weights
    failure = analyze_bytes(log.encode()).failure
    assert failure is not None and failure.phase == "kv-cache"


def test_a_function_frame_below_a_path_frame_still_names_the_step() -> None:
    # GIVEN a traceback whose path frame (model_loader/) is above a function frame of another step
    log = LOADED + _traceback(
        "model_executor/model_loader/base_loader.py in run",
        "v1/worker/gpu_worker.py in determine_available_memory",
    )
    # THEN the innermost function names it, as before
    failure = analyze_bytes(log.encode()).failure
    assert failure is not None and failure.phase == "kv-cache"


def test_a_path_frame_alone_names_the_step() -> None:
    # GIVEN a traceback whose only known frame is a path under model_loader/
    log = LOADED.splitlines(keepends=True)[0] + _traceback(
        "v1/engine/core.py in __init__",
        "model_executor/model_loader/weight_utils.py in safetensors_weights_iterator",
    )
    # THEN the load
    failure = analyze_bytes(log.encode()).failure
    assert failure is not None and failure.phase == "load-weights"


def test_the_real_tiered_kv_failure_is_in_the_kv_cache() -> None:
    failure = analyze_bytes(TIERED.read_bytes()).failure
    assert failure is not None and (failure.phase, failure.model) == ("kv-cache", "target")


def test_vllms_device_initialisation_is_still_read() -> None:
    # GIVEN a vLLM worker's traceback through its own init_device (the needle's whole name)
    log = _traceback(
        "v1/executor/multiproc_executor.py in worker_main", "v1/worker/gpu_worker.py in init_device"
    )
    failure = analyze_bytes(log.encode()).failure
    # THEN it failed initialising its device
    assert failure is not None and (failure.phase, failure.step) == (
        "init-distributed",
        "device initialisation",
    )


def test_sglangs_graph_init_is_no_device_initialisation() -> None:
    # GIVEN an SGLang capture failure's traceback tail behind a compose prefix, its paths cut to the files' names
    # (as a paste's links leave them): nothing says which engine wrote it, so vLLM's frame table is read too
    log = (
        'srv  |   File "model_runner.py", line 1825, in init_device_graphs\n'
        "srv  |     self.graph_runner = CudaGraphRunner(self)\n"
        'srv  |   File "cuda_graph_runner.py", line 393, in __init__\n'
        "srv  |     raise Exception(\n"
        "srv  | Exception: Capture cuda graph failed: \n"
    )
    failure = analyze_bytes(log.encode()).failure
    # THEN a capture's failure, with no "device initialisation" step
    assert failure is not None and failure.phase == "cuda-graph" and failure.step is None
