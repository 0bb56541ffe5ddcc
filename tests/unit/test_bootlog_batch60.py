"""Batch 60 (reports/cpu/2026-12-07a-bootlog-unseen).

A process killed by an uncaught C++ exception: libstdc++ prints `terminate called after throwing an instance of
'c10::Error'` and `  what():  <message>` under it, then the abort follows (`Fatal Python error: Aborted` and Python's
stacks): the error is the exception's message, not the abort.

vLLM 0.21 on profiles its CUDA graphs' memory before it sizes the KV cache: a capture before the KV cache step, then
the engine's own after it. With no configuration in an excerpt to say there is no draft, the second was read as a
draft's capture."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
ASCEND = REAL / "sglang-for-debug-ascend-dsr1-w4a8-pd-decode-dp16-eagle-npugraph-oom.log"
V2_RUNNER = REAL / "vllm-sql-agent-rl-qwen25-coder-15b-v0310-v2-runner-graph-before-kv-ready.log"

# SGLang's graph step on one rank, then a native death in the shapes of the log above (torch_npu's allocator, the
# C++ runtime's terminate handler, faulthandler's dump).
BOOT = b"""[2026-01-19 20:22:40 TP0] Load weight begin. avail mem=60.80 GB
[2026-01-19 20:23:02 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.71 GB, mem usage=40.11 GB.
[2026-01-19 20:23:03 TP0] Capture npu graph begin. This can take up to several minutes. avail mem=12.03 GB
"""
TERMINATE = b"""terminate called after throwing an instance of 'c10::Error'
  what():  NPU out of memory. Tried to allocate 4.00 GiB (NPU 4; 61.27 GiB total capacity; 1.50 GiB free)
Exception raised from malloc at build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1634 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0xb0 (0xfffe211948c0 in /usr/lib/libc10.so)
"""
ABORT = b"""Fatal Python error: Aborted

Thread 0x0000fff94ffff120 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
"""


def test_the_uncaught_exceptions_message_is_the_error_not_the_abort() -> None:
    """GIVEN a rank's graph capture, then `terminate called ...`, its `what():` line and the abort WHEN read THEN the
    boot failed in the graph step with the exception's class and message."""
    failure = analyze_bytes(BOOT + TERMINATE + ABORT).failure
    assert failure is not None and failure.phase == "cuda-graph"
    assert failure.error.startswith("c10::Error: NPU out of memory. Tried to allocate 4.00 GiB"), (
        failure.error
    )


def test_an_abort_with_no_exception_above_it_is_still_the_error() -> None:
    """GIVEN the abort alone WHEN read THEN it is the error, as before."""
    failure = analyze_bytes(BOOT + ABORT).failure
    assert failure is not None and failure.error.startswith("Fatal Python error: Aborted"), failure.error


def test_a_terminate_whose_what_line_is_cut_names_the_exceptions_class() -> None:
    """GIVEN an excerpt that ends at the terminate line WHEN read THEN the error names what was thrown."""
    failure = analyze_bytes(BOOT + TERMINATE.splitlines(keepends=True)[0]).failure
    assert failure is not None and "c10::Error" in failure.error and failure.phase == "cuda-graph"


def test_the_real_log_names_the_npus_out_of_memory() -> None:
    """GIVEN the batch-60 log (16 ranks, each killed by the same uncaught c10::Error, each with an abort after it)
    WHEN read THEN the error is the allocator's message."""
    failure = analyze_bytes(ASCEND.read_bytes()).failure
    assert failure is not None and "NPU out of memory" in failure.error and failure.phase == "cuda-graph"


# vLLM 0.31's engine core after its load, in the shapes of the batch-60 log (no configuration line: an excerpt).
PROFILED_CAPTURE = b"""(EngineCore pid=4275) INFO 10-09 06:00:12 [monitor.py:81] Initial profiling/warmup run took 0.18 s
(EngineCore pid=4275) INFO 10-09 06:00:19 [model_runner.py:1087] Graph capturing finished in 4 secs, took 0.30 GiB
(EngineCore pid=4275) INFO 10-09 06:00:19 [gpu_worker.py:692] Available KV cache memory: 32.23 GiB
(EngineCore pid=4275) INFO 10-09 06:00:19 [gpu_worker.py:707] CUDA graph memory profiling is enabled (default since v0.21.0).
(EngineCore pid=4275) INFO 10-09 06:00:19 [kv_cache_utils.py:2464] GPU KV cache size: 1,207,072 tokens, Maximum concurrency for 16,384 tokens per request: 73.67x
(EngineCore pid=4275) INFO 10-09 06:02:09 [model_runner.py:1087] Graph capturing finished in 5 secs, took 0.20 GiB
"""


def test_a_capture_after_vllms_kv_cache_is_the_targets_not_a_drafts() -> None:
    """GIVEN a capture during vLLM's memory profile, the KV cache, then the capture after it, and nothing that says
    whether a draft runs WHEN read THEN both captures are the target's: no draft appears."""
    models = {(phase.name, phase.model) for phase in analyze_bytes(PROFILED_CAPTURE).phases}
    assert ("cuda-graph", "target") in models and ("cuda-graph", "draft") not in models, models


def test_the_real_logs_excerpt_reads_its_captures_as_the_whole_log_does() -> None:
    """GIVEN the batch-60 log without its first and last fifth (the configuration cut away) WHEN read THEN its second
    capture is the target's 5 s, as in the whole log."""
    lines = V2_RUNNER.read_bytes().split(b"\n")
    cut = len(lines) // 5
    excerpt = analyze_bytes(b"\n".join(lines[cut:-cut]))
    whole = analyze_bytes(V2_RUNNER.read_bytes())
    graphs = [(p.model, p.seconds) for p in excerpt.phases if p.name == "cuda-graph"]
    assert (
        graphs == [(p.model, p.seconds) for p in whole.phases if p.name == "cuda-graph"] == [("target", 5.0)]
    )
