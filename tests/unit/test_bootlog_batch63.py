"""Batch 63 (reports/cpu/2026-12-07e-bootlog-unseen): SGLang's uvicorn could not bind the server's port (an earlier
server still held it), logged `ERROR:    [Errno 98] error while attempting to bind on address ...: address already in
use` and shut the HTTP server down; the warm-up request failed nine minutes later for it. The boot failed at the
bind, not at the warm-up."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
PORT = REAL / "sglang-amdci-qwen3-30b-mi355x-v056post2-tp8-port-in-use-warmup-failed.log"

CAPTURED = b"""[2025-12-19 08:18:24 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=78.2 GB
[2025-12-19 08:18:36 TP0] Capture cuda graph end. Time elapsed: 11.59 s. mem usage=0.66 GB. avail mem=77.59 GB.
[2025-12-19 08:18:36] INFO:     Application startup complete.
"""
BIND = b"""[2025-12-19 08:18:36] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use
[2025-12-19 08:18:36] INFO:     Waiting for application shutdown.
"""
WARMUP = b"""[2025-12-19 08:27:42] Initialization failed. warmup error: Traceback (most recent call last):
requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed connection'))
"""


def test_a_port_in_use_fails_the_boot_at_the_bind() -> None:
    """GIVEN the graphs captured, uvicorn's bind error, then the warm-up's failure WHEN read THEN the boot failed with
    the bind's words."""
    report = analyze_bytes(CAPTURED + BIND + WARMUP)
    assert report.state == "failed" and report.failure is not None
    assert "address already in use" in report.failure.error
    assert report.failure.step is not None and "port" in report.failure.step


def test_a_log_ending_at_the_bind_error_is_not_ready() -> None:
    """GIVEN the log ends right after the bind error WHEN read THEN the server is not up: its HTTP server never
    listened."""
    assert analyze_bytes(CAPTURED + BIND).state == "failed"


def test_the_real_log_names_the_port() -> None:
    report = analyze_bytes(PORT.read_bytes())
    assert report.failure is not None and "address already in use" in report.failure.error
