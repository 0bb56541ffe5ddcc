"""What an engine writes while a rank drives it is captured at the file descriptors and kept, not printed."""

from __future__ import annotations

import os
import sys

import pytest

from ckptprof.loader import engine_output


def test_python_and_c_level_writes_are_captured_and_the_terminal_gets_none(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # GIVEN an engine that warns through Python and writes straight to the descriptors (torch's C++ logging does)
    with engine_output.capture() as captured:
        print(
            "W1202 00:06:27.135000 torch/_opaque_base.py:6] torch._opaque_base is deprecated", file=sys.stderr
        )
        os.write(1, b"Failed to import from vllm._C: ModuleNotFoundError\n")
        os.write(2, b"INFO 12-02 [__init__.py:220] No platform detected\n")
    # THEN the text is kept, and nothing reached this process's stdout or stderr
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "torch._opaque_base is deprecated" in captured.text
    assert "Failed to import from vllm._C" in captured.text
    assert "No platform detected" in captured.text
    # and writes after the block go where they always went
    print("after")
    assert capfd.readouterr().out == "after\n"


def test_a_long_output_keeps_its_head_and_tail() -> None:
    with engine_output.capture() as captured:
        os.write(2, b"first line\n" + b"x" * (3 * engine_output.KEEP_BYTES) + b"\nlast line\n")
    assert captured.total_bytes > 3 * engine_output.KEEP_BYTES
    assert captured.text.startswith("first line") and captured.text.endswith("last line\n")
    assert "bytes not kept" in captured.text and len(captured.text) < 2 * engine_output.KEEP_BYTES


def test_the_summary_counts_warnings_and_names_the_first_error() -> None:
    text = (
        "/site/sglang/srt/layers/quantization/awq/awq.py:53: UserWarning: Only CUDA, HIP and XPU support AWQ\n"
        '  warnings.warn(f"Only CUDA, HIP and XPU support AWQ currently.")\n'
        "INFO 12-02 00:14:52 [__init__.py:220] No platform detected\n"
        "RuntimeError: Tried to register an operator (vllm::all_reduce) multiple times\n"
    )
    summary = engine_output.summarise(text)
    assert (summary.lines, summary.warnings, summary.errors) == (4, 2, 1)
    assert summary.first_error is not None and summary.first_error.startswith(
        "RuntimeError: Tried to register"
    )
    assert summary.sentence("vLLM") == (
        "vLLM wrote 4 lines, 2 warnings, 1 error line while it loaded (first error: RuntimeError: Tried to "
        "register an operator (vllm::all_reduce) multiple times)"
    )
