"""What blind batch 10 of issue #33 taught the reader (reports/cpu/2026-12-04e-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

BARS = b"".join(
    b"Loading safetensors checkpoint shards:  %d%% Completed | %d/14 [00:%02d<02:33, 11.83s/it]\n"
    % (n * 100 // 14, n, n)
    for n in range(0, 4)
)


def test_the_tpu_runners_compile_is_its_graph_step() -> None:
    # GIVEN vLLM V1 on TPU: the KV cache sized, then the runner's XLA compile for each input shape, then a crash
    # (vllm#15727)
    log = b"""INFO 03-31 07:47:34 [loader.py:447] Loading weights took 2.84 seconds
INFO 03-31 07:47:51 [kv_cache_utils.py:577] GPU KV cache size: 985,328 tokens
INFO 03-31 07:47:51 [tpu_model_runner.py:769] Compiling the model with different input shapes.
INFO 03-31 07:47:51 [tpu_model_runner.py:773]   -- num_tokens: 16
ERROR 03-31 07:48:38 [core.py:367] EngineCore hit an exception: Traceback (most recent call last):
"""
    report = analyze_bytes(log)
    # THEN the compile is the target's graph phase, and the crash happened in it
    assert [(phase.name, phase.model) for phase in report.phases][-1] == ("cuda-graph", "target")
    assert report.failure is not None and report.failure.phase == "cuda-graph"


def test_vllms_loader_says_vllm_when_nothing_else_does() -> None:
    # GIVEN a Gaudi fork's paste: records in vLLM's logger form before 0.8 (no bracket around the file), then bars
    # that both engines draw (HabanaAI/vllm-fork#193). The logger form itself is not counted as vLLM's: counted over
    # a whole block as process tags are, it made an untimed excerpt followed by a vLLM 0.4 server's log read as
    # vLLM's (nine concatenation tests, batch 10). The loader's own record, `Loading weights on hpu ...`
    # (base_loader.py's load_model; the fork logs it at INFO), is read instead (batch 15's session).
    log = (
        b"INFO 08-17 07:58:41 selector.py:85] Using HabanaAttention backend.\n"
        b"INFO 08-17 07:58:41 loader.py:284] Loading weights on hpu ...\n" + BARS
    )
    # THEN the log is vLLM's
    assert analyze_bytes(log).framework == "vllm"
    # AND a log that holds SGLang's own records is still SGLang's (SGLang before 0.4 imported vLLM's logger)
    sglang = log + b"[2024-08-17 07:59:41 TP0] Load weight end. type=LlamaForCausalLM, avail mem=60.1 GB\n"
    assert analyze_bytes(sglang).framework == "sglang"


def test_an_untagged_traceback_under_a_ranks_announcement_is_that_ranks() -> None:
    # GIVEN SGLang 0.3: a rank announces the exception, then Python's traceback follows bare (sglang#1479)
    log = b"""[23:17:01 TP0] Capture cuda graph begin. This can take up to several minutes.
[23:17:01 TP4] Capture cuda graph begin. This can take up to several minutes.
[23:17:08 TP4] Exception in run_tp_server:
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 147, in __init__
"""
    report = analyze_bytes(log)
    # THEN the failure is TP4's, in its graph capture, in the announcement's words
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase) == ("TP4", "cuda-graph")
    assert report.error is not None and report.error.startswith("Exception in run_tp_server")
    # AND an untagged traceback under a line that announces nothing stays the main process's
    plain = log.replace(b"[23:17:08 TP4] Exception in run_tp_server:", b"[23:17:08 TP4] Capturing batches.")
    failure = analyze_bytes(plain).failure
    assert failure is not None and failure.rank == ""


def test_a_crash_right_after_a_phase_ended_is_warned_as_after_it() -> None:
    # GIVEN a Gaudi fork's load ending, then an error in the same second (HabanaAI/vllm-fork#776)
    log = b"""INFO 02-04 12:35:23 hpu_model_runner.py:794] Loading model weights took in total 15.05 GiB of device memory
ERROR 02-04 12:35:23 engine.py:387] [Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, tensor_data is empty.
"""
    report = analyze_bytes(log)
    # THEN the failure and its warning both say it came after the load, not during it
    assert report.failure is not None and report.failure.phase is None
    assert "after target weights loaded" in report.summary
    failed = [warning for warning in report.warnings if warning.startswith("failed:")]
    assert failed and all(" after load-weights (target)" in warning for warning in failed), failed
