"""What blind batch 13 of issue #33 taught the reader (reports/cpu/2026-12-04h-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

TAG = b"(Worker_TP3_EP3 pid=213) ERROR 01-28 09:11:47 [multiproc_executor.py:751] "


def test_a_log_viewers_local_time_and_bar_is_no_part_of_a_bar() -> None:
    # GIVEN a container log viewer's export: every line behind its local time and a bar, the loader's bar too
    # (99sono/DockerBuildFiles' vLLM dump under WSL)
    stamp = b"2026-05-01 18:45:31.355 | "
    log = (
        stamp + b"(EngineCore pid=255) INFO 05-01 16:45:09 [gpu_model_runner.py:4777] Starting to load model x...\n"
        + stamp + b"Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]\n"
        + stamp + b"Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:01<00:00,  1.17s/it]\n"
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the bar is the loader's, by its own description
    (bar,) = report.progress
    assert (bar.desc, bar.done, bar.total) == ("Loading safetensors checkpoint shards", 1, 1)
    assert report.loader == "default"


def test_a_traceback_cut_before_its_error_line_says_what_its_logger_said_with_it() -> None:
    # GIVEN a worker's logger.exception: its message, then the traceback, cut before the error line
    # (vllm-ascend#6329)
    log = (
        TAG + b"WorkerProc failed to start.\n"
        + TAG + b"Traceback (most recent call last):\n"
        + TAG + b'  File "/vllm-workspace/vllm/vllm/v1/executor/multiproc_executor.py", line 562, in __init__\n'
        + TAG + b"    self.worker.load_model()\n"
        + TAG + b'  File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker.py", line 376, in load_model\n'
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the failure is the traceback (its frames name the load) and its error says what the worker logged
    assert report.failure is not None and report.failure.phase == "load-weights"
    assert (
        report.failure.error == "WorkerProc failed to start. (the log ends before its traceback's error line)"
    )
    # AND a death the worker logged before its boot moved on is not what its later traceback was
    info = b"(Worker_TP3_EP3 pid=213) INFO 01-28 09:11:47 [default_loader.py:384] Loading weights took 1.0 seconds\n"
    apart = TAG + b"WorkerProc failed to start.\n" + info + log[log.index(b"\n") + 1 :]
    report = analyze_bytes(apart)
    assert report.failure is not None
    assert report.failure.error.startswith("Traceback (most recent call last):")
