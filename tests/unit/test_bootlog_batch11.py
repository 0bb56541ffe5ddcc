"""What blind batch 11 of issue #33 taught the reader (reports/cpu/2026-12-04f-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

V1_LOAD = (
    b"(EngineCore_DP0 pid=166) INFO 11-11 10:02:05 [default_loader.py:314] Loading weights took 6.11 seconds\n"
    b"(EngineCore_DP0 pid=166) INFO 11-11 10:02:43 [backends.py:281] Compiling a graph for dynamic shape takes "
    b"35.06 s\n"
)


def test_rocblas_aborting_on_a_missing_kernel_library_is_a_death() -> None:
    # GIVEN vLLM on a ROCm GPU whose architecture rocBLAS ships no kernels for: it prints its error, the list of
    # the libraries it has, and aborts (rocBLAS tensile_host.cpp; vllm#28460)
    log = V1_LOAD + (
        b"\nrocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: Illegal seek for GPU arch "
        b": gfx1150\n List of available TensileLibrary Files : \n"
        b'"/opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1030.dat"\n'
    )
    report = analyze_bytes(log)
    # THEN the boot failed there, after the load had ended
    assert report.state == "failed" and report.failure is not None
    assert report.failure.error.startswith("rocBLAS error: Cannot read")
    assert report.failure.phase is None
    # AND rocBLAS's other words are no death of their own
    assert (
        analyze_bytes(V1_LOAD + b"rocBLAS warning: no kernel tuned for this size\n").state == "load-weights"
    )


def test_a_traceback_header_read_by_ocr_still_opens_a_traceback() -> None:
    # GIVEN a paste copied from a screenshot: "call" read as "cal1" (sglang#21670)
    log = (
        b"[2026-04-10 13:17:24] Load weight begin. avail mem=60.89 GB\n"
        b"[2026-04-10 13:17:25] Scheduler hit an exception: Traceback (most recent cal1 last):\n"
        b'File "/usr/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3562, in run_scheduler\n'
    )
    report = analyze_bytes(log)
    # THEN the failure is the scheduler's own line, during the load
    assert report.failure is not None and report.failure.error.startswith("Scheduler hit an exception")
    assert report.failure.phase == "load-weights"


def test_only_a_kv_cache_size_with_its_number_ends_the_kv_step() -> None:
    # GIVEN vLLM 0.21+'s note on CUDA graph memory profiling, which speaks of "the same effective KV cache size",
    # on a worker that has not sized its cache yet (vllm runner#251)
    note = (
        b"(Worker_TP1 pid=448) INFO 08-14 14:07:22 [gpu_worker.py:578] CUDA graph memory profiling is enabled "
        b"(default since v0.21.0). To maintain the same effective KV cache size as before, increase "
        b"--gpu-memory-utilization to 0.8352.\n"
    )
    available = (
        b"(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:563] Available KV cache memory: 6.87 GiB\n"
    )
    report = analyze_bytes(note + available)
    # THEN only TP0 is in its KV cache step, and the step is still running
    (step,) = report.phases
    assert (step.name, step.ranks, step.end) == ("kv-cache", 1, None)
    # AND 0.34's form of the size line ("GPU KV cache size: N tokens, Maximum concurrency ...") ends it
    sized = (
        b"(EngineCore pid=367) INFO 08-14 14:07:23 [kv_cache_utils.py:1169] GPU KV cache size: 8,192 tokens\n"
    )
    (step,) = analyze_bytes(note + available + sized).phases
    assert step.end is not None


def test_a_bar_met_mid_way_after_a_workers_crash_is_no_progress() -> None:
    # GIVEN a worker's traceback in load_weights, then the loader bar's only frame in the excerpt (tqdm draws its
    # last frame as the crash unwinds the loop), then the engine's own death record (vllm#23025)
    tag = b"(VllmWorker rank=0 pid=3781015) ERROR 08-16 11:45:16 [multiproc_executor.py:511] "
    log = (
        tag + b"Traceback (most recent call last):\n"
        + tag + b'  File "/x/vllm/model_executor/models/glm4_moe.py", line 531, in load_weights\n'
        + tag + b"KeyError: 'layers.1.mlp.experts.w13_weight'\n"
        b"Loading safetensors checkpoint shards:  47% Completed | 7/15 [00:20<00:23,  2.93s/it]\n"
        b"ERROR 08-16 11:45:17 [core.py:632] EngineCore failed to start.\n"
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the worker's error is the failure, in the load
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase) == ("rank0", "load-weights")
    assert report.failure.error == "KeyError: 'layers.1.mlp.experts.w13_weight'"
    # AND a bar that starts from nothing after such a crash is progress: the crash was survived
    fresh = log.replace(b"47% Completed | 7/15 [00:20<00:23", b" 0% Completed | 0/15 [00:00<?").replace(
        b"ERROR 08-16 11:45:17 [core.py:632] EngineCore failed to start.\n", b""
    )
    assert analyze_bytes(fresh).failure is None
