"""Batch 64 (reports/cpu/2026-12-07f-bootlog-unseen): SGLang started DP8 x TP8 on a machine of eight GPUs without DP
attention, 64 schedulers for 8 devices; 56 died with `HIP error: invalid device ordinal`. The first to die, DP4 TP5,
had logged no boot step (in 0.5.3.post1 only each DP group's TP0 logs `Init torch distributed begin.`), and the others'
progress after it read as that rank having survived: the reader named the next death instead. SGLang's `Scheduler hit an
exception: Traceback ...` is a process's last word (it sends its parent SIGQUIT next: scheduler.py's
run_scheduler_process), whatever the other ranks log after it."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
ORDINAL = REAL / "sglang-amdci-dsr1-mxfp4-mi355x-v053post1-dp8-tp8-no-dpattn-invalid-device-ordinal.log"

TRACEBACK = """Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 643, in init_torch_distributed
    torch.get_device_module(self.device).set_device(self.gpu_id)
torch.AcceleratorError: HIP error: invalid device ordinal
"""


def _dies(stamp: str, rank: str) -> str:
    return f"[2025-10-13 {stamp} {rank}] {TRACEBACK}"


def test_a_rank_that_never_began_a_step_and_died_first_is_the_failure() -> None:
    """GIVEN a rank that logged no step and died, then another rank that began init and died WHEN read THEN the first
    death is the boot's failure."""
    log = (
        _dies("13:14:51", "DP4 TP5")
        + "[2025-10-13 13:14:52 DP3 TP0] Init torch distributed begin.\n"
        + _dies("13:14:52", "DP3 TP0")
    )
    report = analyze_bytes(log.encode())
    assert report.state == "failed" and report.failure is not None
    assert report.failure.rank == "DP4 TP5"
    assert "invalid device ordinal" in report.failure.error


def test_a_plain_traceback_of_a_rank_with_no_step_is_survived_when_others_go_on() -> None:
    """GIVEN a bare traceback from a rank that logged no step, then another rank's progress WHEN read THEN it was no
    failure (unchanged): only SGLang's "hit an exception" says the process is gone."""
    log = (
        "[2025-10-13 13:14:51 DP4 TP5] Traceback (most recent call last):\n"
        "[2025-10-13 13:14:51 DP4 TP5] ValueError: x\n"
        "[2025-10-13 13:14:52 DP3 TP0] Init torch distributed begin.\n"
    )
    assert analyze_bytes(log.encode()).failure is None


def test_vllms_worker_hit_an_exception_is_a_call_it_survives() -> None:
    """GIVEN vLLM's `WorkerProc hit an exception.` (the worker goes on serving calls), then another rank's progress
    WHEN read THEN no failure: the words that end a process are SGLang's, with the traceback on their line."""
    tag = "(VllmWorker rank=1 pid=11) ERROR 08-16 11:45:16 [multiproc_executor.py:511] "
    log = (
        f"{tag}WorkerProc hit an exception.\n"
        f"{tag}Traceback (most recent call last):\n"
        f"{tag}ValueError: x\n"
        "(VllmWorker rank=0 pid=10) INFO 08-16 11:45:17 [default_loader.py:262] Loading weights took 2.00 seconds\n"
    )
    assert analyze_bytes(log.encode()).failure is None


def test_the_real_log_names_the_first_death() -> None:
    report = analyze_bytes(ORDINAL.read_bytes())
    assert report.failure is not None and report.failure.rank == "DP4 TP5"
