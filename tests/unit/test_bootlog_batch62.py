"""Batch 62 (reports/cpu/2026-12-07d-bootlog-unseen): SGLang on ROCm (AMD's nightly CI logs).

- A PD-disaggregation server warms up with a request of its own after uvicorn is up (`Start of pd disaggregation
  warmup ...`): until it returns the server is not ready, and a warm-up that hangs until the scheduler's watchdog
  kills the server (`Watchdog timeout (self.watchdog_timeout=180.0, ...)`, then SIGQUIT) is a failed boot.
- ROCm's runtime prints `Memory access fault by GPU node-N (...)` and aborts the process: a death, with no Python
  traceback after it.
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
WATCHDOG = REAL / "sglang-amdci-dsr1-mxfp4-mi355x-v056post2-pd-decode-tp4-warmup-watchdog-timeout.log"
FAULT = REAL / "sglang-amdci-dsv3-mi300x-v056post1-tp8-torch-compile-graph-memory-access-fault.log"

LOADED = b"""[2025-12-19 19:43:40 TP2] Load weight begin. avail mem=286.33 GB
[2025-12-19 19:45:23 TP2] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=201.25 GB, mem usage=85.08 GB.
[2025-12-19 19:45:30 TP2] KV Cache is allocated. #tokens: 1000000, KV size: 60.00 GB
[2025-12-19 19:45:31 TP2] Memory pool end. avail mem=120.00 GB
[2025-12-19 19:47:44] INFO:     Application startup complete.
[2025-12-19 19:47:44] INFO:     Uvicorn running on http://10.235.26.245:30026 (Press CTRL+C to quit)
"""
WARMUP = b"[2025-12-19 19:47:45] Start of pd disaggregation warmup ...\n"
HANG = b"""[2025-12-19 19:52:14 TP2] Watchdog timeout (self.watchdog_timeout=180.0, self.soft=False)
[2025-12-19 19:52:19] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
"""


def test_a_pd_server_in_its_warmup_is_not_ready() -> None:
    """GIVEN uvicorn up, then the PD warm-up's start, and the log ends WHEN read THEN the server is not ready yet."""
    assert analyze_bytes(LOADED).state == "ready"  # uvicorn up with nothing after it: up
    assert analyze_bytes(LOADED + WARMUP).state != "ready"


def test_a_watchdog_timeout_in_the_warmup_fails_the_boot_on_its_rank() -> None:
    """GIVEN the warm-up hung until the scheduler's watchdog fired WHEN read THEN the boot failed, on the rank whose
    watchdog fired, with its words."""
    report = analyze_bytes(LOADED + WARMUP + HANG)
    assert report.state == "failed"
    assert report.failure is not None and report.failure.rank == "TP2"
    assert "Watchdog timeout" in report.failure.error


def test_the_real_watchdog_log_reads_failed() -> None:
    report = analyze_bytes(WATCHDOG.read_bytes())
    assert report.state == "failed" and report.failure is not None
    assert report.failure.rank == "TP2" and "Watchdog timeout" in report.failure.error


def test_a_rocm_memory_access_fault_is_a_death_in_the_step_it_ended() -> None:
    """GIVEN ranks capturing graphs, then the HSA runtime's fault lines and nothing else WHEN read THEN the boot
    failed in the graph step with the fault's words."""
    report = analyze_bytes(FAULT.read_bytes())
    assert report.state == "failed" and report.failure is not None
    assert report.failure.phase == "cuda-graph" and "Memory access fault by GPU" in report.failure.error
