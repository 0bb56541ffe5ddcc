"""What blind batch 15 of issue #33 taught the reader (reports/cpu/2026-12-05b-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record


def test_sglangs_rank_tags_name_the_rank_when_a_paste_cut_the_time_away() -> None:
    # GIVEN a scheduler's crash pasted with its times cut away and paths shortened (sglang#24481)
    log = (
        b"[TP0] Capture draft extend cuda graph begin (step 2). avail mem=12.08 GB\n"
        b"[TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File ".../scheduler.py", line 666, in maybe_init_draft_worker\n'
        b"    self.draft_worker = DraftWorkerClass(**draft_worker_kwargs)\n"
        b"RuntimeError: boom\n"
    )
    report = analyze_bytes(log)
    # THEN TP0 failed, in the draft's graph capture, and no line is said not to be understood
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase, report.failure.model) == ("TP0", "cuda-graph", "draft")
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [("cuda-graph", "draft", 1)]
    assert report.unparsed_records == 0


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[TP3] Load weight begin. avail mem=70.1 GB", "TP3"),
        ("[DP1 TP3 EP3] Load weight begin. avail mem=70.1 GB", "DP1 TP3 EP3"),
        ("[PP0 ATTN_CP1 MOE_DP0 TP2] Load weight begin.", "PP0 ATTN_CP1 MOE_DP0 TP2"),
    ],
)
def test_the_untimed_tags_are_sglangs_own(line: str, rank: str) -> None:
    record = parse_record(line)
    assert (record.style, record.rank, record.timestamp, record.message) == (
        "sglang",
        rank,
        None,
        line[line.index("]") + 2 :],
    )


@pytest.mark.parametrize(
    "line", ["[GPU0] Load weight begin.", "[TP0]Load weight begin.", "[tp0] Load weight begin."]
)
def test_another_bracketed_word_with_a_number_is_no_rank(line: str) -> None:
    assert parse_record(line).style == "plain"


ENGINE = b"(EngineCore pid=8911) "


def _capture_log(speculator_line: bytes) -> bytes:
    return (
        ENGINE + b"INFO 07-01 14:08:41 [arg_utils.py:1] speculative_config={'method': 'eagle3'}\n"
        + ENGINE + b"INFO 07-01 14:08:51 [model_runner.py:281] Loading model from scratch...\n"
        + ENGINE + b"INFO 07-01 14:08:53 [default_loader.py:430] Loading weights took 1.48 seconds\n"
        + ENGINE + b"INFO 07-01 14:08:54 [default_loader.py:430] Loading weights took 0.46 seconds\n"
        + ENGINE + b"INFO 07-01 14:08:54 [model_runner.py:302] Model loading took 9.35 GiB and 3.8 seconds\n"
        + ENGINE + b"INFO 07-01 14:09:01 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens\n"
        + ENGINE + b"Capturing CUDA graphs (FULL):   0%|          | 0/50 [00:00<?, ?it/s]\r"
        + ENGINE + b"Capturing CUDA graphs (FULL): 100%|##########| 50/50 [00:01<00:00, 43.30it/s]\n"
        + ENGINE + b"INFO 07-01 14:09:04 [speculator.py:100] " + speculator_line + b"\n"
        + ENGINE + b"Capturing prefill CUDA graphs (FULL):   0%|          | 0/50 [00:00<?, ?it/s]\n"
        + ENGINE + b"INFO 07-01 14:09:06 [model_runner.py:726] Graph capturing finished in 5 secs, took 1.16 GiB\n"
    )  # fmt: skip


@pytest.mark.parametrize(
    "speculator_line",
    [
        b"Capturing model for speculator...",  # 0.24
        b"Capturing model for DFlash speculator...",  # 0.34's dflash/
        b"Capturing model for multi-module MTP speculator...",  # 0.34's multi_module_mtp/
        b"Capturing autoregressive speculator...",  # 0.34's autoregressive/ (EAGLE)
    ],
)
def test_the_v2_runners_speculator_capture_is_the_drafters_graph_step(speculator_line: bytes) -> None:
    # GIVEN the V2 model runner's capture: the target's bars (no record begins them), then the speculator's line
    # and its bars, then one `Graph capturing finished` for both (vLLM 0.24, dcstang/eagle3-spec-dec)
    report = analyze_bytes(_capture_log(speculator_line))
    graphs = [(phase.model, phase.start, phase.end) for phase in report.phases if phase.name == "cuda-graph"]
    # THEN the target's capture ran until the speculator's began, and that one until the capture finished
    assert graphs == [
        ("target", "07-01 14:09:01", "07-01 14:09:04"),
        ("draft", "07-01 14:09:04", "07-01 14:09:06"),
    ]
    # AND the target's bars stay the target's
    assert [(bar.desc, bar.model) for bar in report.progress][:1] == [("Capturing CUDA graphs", "target")]
