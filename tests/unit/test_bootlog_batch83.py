"""Batch 83 (reports/cpu/2026-12-07zf-bootlog-unseen): right on first sight, and one thing seen beyond the scored keys.

vllm-ascend#922's paste keeps a terminal's caret notation as text: `^[[1;36m` before each worker tag, which the reader
already took for the colour code it is, and `^M`, the carriage return, at the end of each line, which stayed in the
records' words (a warning quoted `... processing method load_model.^M`).
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_path
from ckptprof.bootlog.parse import parse_record, strip_ansi

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
CARET_PASTE = REAL / (
    "vllm-ascend-922-qwen25-vl-7b-v085post1-v0-tp4-mindie-turbo-offline-load-weights-iterator-typeerror-fail.log"
)
LINE = (
    "^[[1;36m(VllmWorkerProcess pid=113915)^[[0;0m ERROR 05-21 11:56:08 [multiproc_worker_utils.py:238] Exception in "
    "worker VllmWorkerProcess while processing method load_model.^M"
)


def test_a_caret_pastes_line_end_is_no_part_of_the_record() -> None:
    record = parse_record(strip_ansi(LINE))
    assert record.rank == "pid113915"
    assert record.message.endswith("method load_model.")


def test_a_caret_m_inside_the_words_stays() -> None:
    text = "^[[0;0m INFO reading ^M as text"
    assert "^M as text" in strip_ansi(text)


def test_the_real_pastes_warnings_quote_no_carriage_return() -> None:
    report = analyze_path(str(CARET_PASTE))
    assert report.failure is not None and report.failure.rank == "pid113915"
    assert report.warnings
    assert not any("^M" in warning for warning in report.warnings)
