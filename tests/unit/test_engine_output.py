"""What an engine writes while a rank drives it is captured at the file descriptors and kept, not printed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.loader import engine_output
from ckptprof.render.rows import faithful_source_line
from ckptprof.session import RankModel, RankResult, Session


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


def _session_with(tmp_path: Path, source: str | None, outputs: list[str | None]) -> Path:
    config: dict[str, object] = {"tp": len(outputs), "devices": ["cpu"]}
    if source is not None:
        config["faithful_source"] = source
    ranks = [
        RankResult(rank=i, device="cpu", engine_output=text, models=[RankModel(role="target", wall_s=1.0)])
        for i, text in enumerate(outputs)
    ]
    return Session(config=config, ranks=ranks).save(tmp_path / "session.json")


def test_report_shows_what_the_engine_wrote_rank_by_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = _session_with(
        tmp_path,
        "SGLang's own safetensors_weights_iterator (sglang 0.5.23, installed here)",
        ["UserWarning: gguf is CUDA only\nWARNING pynvml missing\n", None],
    )
    assert main(["report", str(saved), "--engine-output"]) == 0
    assert capsys.readouterr().out == (
        "--- rank 0 (cpu): 2 lines ---\nUserWarning: gguf is CUDA only\nWARNING pynvml missing\n"
    )


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (None, "the run had no faithful pass"),
        (
            "ckptprof's replica of SGLang's sequence (--no-engine-iterator)",
            "the faithful pass ran ckptprof's replica",
        ),
        (
            "SGLang's own safetensors_weights_iterator (sglang 0.5.23, installed here)",
            "the engine wrote nothing",
        ),
    ],
)
def test_report_says_why_no_engine_output_was_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str | None, why: str
) -> None:
    saved = _session_with(tmp_path, source, [None, ""])
    assert main(["report", str(saved), "--engine-output"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"no engine output in this session: {why}"), out


def test_the_run_summary_points_at_the_command_that_shows_the_engine_output(tmp_path: Path) -> None:
    session = Session.load(
        _session_with(tmp_path, "SGLang's own x (sglang 0.5.23, installed here)", ["a\n", "b\n"])
    )
    line = faithful_source_line(session)
    assert line is not None
    assert line.endswith(
        "what it wrote is kept in the session (2 ranks: `ckptprof report SESSION --engine-output` shows it)"
    )
