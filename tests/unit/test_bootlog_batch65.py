"""Batch 65 (reports/cpu/2026-12-07g-bootlog-unseen): an SGLang prefill server of AMD's nightly CI died importing its
HTTP server (`ImportError: cannot import name 'ServerArgs' from 'sglang'`), before any rank started. The only prefix
the log held in an engine's form was vLLM's platform line, which SGLang prints when it imports vLLM's code: read as a
process tag of vLLM's, it stopped the reader from reading the traceback's frames, every one of them in SGLang's
modules, and the log read as vLLM's."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
IMPORT_ERROR = REAL / "sglang-amdci-dsr1-mi355x-v055post3-pd-prefill-launcher-importerror-serverargs.log"

PLATFORM = b"INFO 11-30 16:16:00 [__init__.py:241] Automatically detected platform rocm.\n"
TRACEBACK = b"""Traceback (most recent call last):
  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 18, in run_server
    from sglang.srt.entrypoints.http_server import launch_server
  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/engine.py", line 41, in <module>
    from sglang.srt.managers.data_parallel_controller import (
ImportError: cannot import name 'ServerArgs' from 'sglang' (unknown location)
"""


def test_a_traceback_through_sglangs_modules_outweighs_a_vllm_styled_line() -> None:
    """GIVEN vLLM's platform line, then a traceback whose frames are SGLang's modules WHEN read THEN SGLang's boot,
    failed with the import's error."""
    report = analyze_bytes(PLATFORM + TRACEBACK)
    assert report.framework == "sglang"
    assert report.state == "failed" and report.failure is not None
    assert "cannot import name 'ServerArgs'" in report.failure.error


def test_a_vllm_traceback_after_the_same_line_stays_vllms() -> None:
    """GIVEN the same line, then a traceback through vLLM's modules WHEN read THEN vLLM's (the frames decide)."""
    vllm = TRACEBACK.replace(
        b"/sgl-workspace/sglang/python/sglang/launch_server.py", b"/x/vllm/entrypoints/cli/main.py"
    )
    vllm = vllm.replace(
        b"/sgl-workspace/sglang/python/sglang/srt/entrypoints/engine.py", b"/x/vllm/engine/arg_utils.py"
    )
    assert analyze_bytes(PLATFORM + vllm).framework == "vllm"


def test_the_real_log_is_sglangs() -> None:
    report = analyze_bytes(IMPORT_ERROR.read_bytes())
    assert (report.framework, report.state) == ("sglang", "failed")
