"""Batch 76 (reports/cpu/2026-12-07v-bootlog-unseen): two ways a vLLM boot dies that the reader misread at first sight.

- ROCm's runtime (HSA) prints `HW Exception by GPU node-1 (Agent handle: 0x...) reason :GPU Hang` when the device stops
  answering, then aborts the process (`Aborted (core dumped)`, ROCm/ROCm#5590): the boot died there.
- vLLM's engine core logs `EngineCore failed to start.` with logger.exception, whose traceback follows on its lines:
  the traceback's error line says what failed (ROCm/ROCm#6055's `Exception: WorkerProc initialization failed ...`).
  Where the log ends before that line, the announcement is all there is.
"""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

CORE = "(EngineCore_DP0 pid=809) "
LOADED = (
    f"{CORE}INFO 11-14 21:01:44 [gpu_model_runner.py:2930] Starting to load model ibm-granite/granite-4.0-h-small...\n"
    f"{CORE}INFO 11-14 21:02:59 [default_loader.py:314] Loading weights took 71.42 seconds\n"
    f"{CORE}INFO 11-14 21:03:26 [monitor.py:34] torch.compile takes 18.85 s in total\n"
)
HANG = "HW Exception by GPU node-1 (Agent handle: 0x2f0fbb70) reason :GPU Hang\nAborted (core dumped)\n"


def test_rocms_gpu_hang_ends_the_boot() -> None:
    report = analyze_bytes((LOADED + HANG).encode())
    assert report.state == "failed"
    assert report.failure is not None and "GPU Hang" in report.failure.error


def test_without_the_runtimes_words_the_boot_is_still_under_way() -> None:
    assert analyze_bytes(LOADED.encode()).state != "failed"


ENGINE = "(EngineCore pid=500) "
LOGGED = f"{ENGINE}ERROR 03-23 22:46:30 [core.py:1108] "
ANNOUNCED = (
    f"{ENGINE}INFO 03-23 22:46:29 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 "
    "distributed_init_method=tcp://127.0.0.1:36821 backend=nccl\n"
    f"{LOGGED}EngineCore failed to start.\n"
    f"{LOGGED}Traceback (most recent call last):\n"
    f'{LOGGED}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 736, in '
    "wait_for_ready\n"
    f"{LOGGED}    raise e from None\n"
)
ERROR_LINE = (
    f"{LOGGED}Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace "
    "for root cause.\n"
)


def test_a_logged_traceback_under_its_announcement_gives_the_error() -> None:
    report = analyze_bytes((ANNOUNCED + ERROR_LINE).encode())
    assert report.failure is not None
    assert report.failure.error.startswith("Exception: WorkerProc initialization failed")


def test_an_announcement_whose_traceback_the_log_cuts_is_the_error() -> None:
    report = analyze_bytes(ANNOUNCED.encode())
    assert report.failure is not None
    assert report.failure.error.startswith("EngineCore failed to start.")
