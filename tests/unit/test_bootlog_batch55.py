"""Batch 55 (reports/cpu/2026-12-06p-bootlog-unseen): the code line under a plain traceback's frame names the function
the next frame runs, which an excerpt may cut (sglang#28521: a draft worker's `__init__` calling
`self.init_cuda_graphs()`, and the excerpt ends)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

HEAD = b"""[2026-06-17 09:57:15 TP7] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 802, in maybe_init_draft_worker
    self.draft_worker = DraftWorkerClass(**draft_worker_kwargs)
  File "/sgl-workspace/sglang/python/sglang/srt/speculative/multi_layer_eagle_worker_v2.py", line 190, in __init__
"""


def _colour(log: bytes) -> bytes:
    return b"\n".join(b"\x1b[32m" + line + b"\x1b[0m" if line else line for line in log.split(b"\n"))


@pytest.mark.parametrize("coloured", [False, True], ids=["plain", "ansi"])
def test_the_call_under_the_last_frame_says_what_the_process_was_doing(coloured: bool) -> None:
    """GIVEN a traceback cut after the draft worker's frame WHEN its code line calls init_cuda_graphs THEN the failure
    is in the draft's CUDA graph capture, in plain text and in colour."""
    log = HEAD + b"    self.init_cuda_graphs()\n"
    report = analyze_bytes(_colour(log) if coloured else log)
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase, report.failure.model) == ("TP7", "cuda-graph", "draft")


def test_a_call_no_frame_rule_knows_says_no_phase() -> None:
    """GIVEN the same traceback WHEN the code line calls a function no frame table names THEN no phase is made up."""
    report = analyze_bytes(HEAD + b"    self.warm_up_kernels()\n")
    assert report.failure is not None
    assert (report.failure.phase, report.failure.model) == (None, "draft")


def test_a_code_line_after_the_error_names_no_step() -> None:
    """GIVEN a traceback that ended with its error WHEN another frame's code line follows (a second traceback's, no
    header of its own) THEN the first failure keeps what its own frames said."""
    log = HEAD + b"    self.warm_up_kernels()\nRuntimeError: boom\n"
    log += b'  File "/x/sglang/srt/model_executor/model_runner.py", line 9, in run\n    self.init_cuda_graphs()\n'
    report = analyze_bytes(log)
    assert report.failure is not None
    assert report.failure.phase is None and report.error is not None and "boom" in report.error


STATS = b"INFO 02-22 00:50:01 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 4.5 tokens/s\n"


def test_a_server_seen_serving_requests_is_not_called_an_offline_run() -> None:
    """GIVEN an excerpt that opens in a server's serving (batch 55's journald tail: its throughput lines, no ready
    line) WHEN read THEN it is ready, serving requests, and not said to be a script's offline run."""
    report = analyze_bytes(STATS)
    assert report.state == "ready"
    assert "serving requests" in report.summary and "offline" not in report.summary


def test_an_offline_run_is_still_one() -> None:
    """GIVEN an offline engine's `Processed prompts` bar WHEN read THEN it is the offline run it was, even with a
    throughput line after it."""
    bar = b"Processed prompts: 100%|##########| 4/4 [00:01<00:00,  3.10it/s, est. speed input: 20.1 toks/s]\n"
    report = analyze_bytes(bar + STATS)
    assert report.state == "ready" and "an offline run" in report.summary


def test_a_serving_servers_request_errors_are_no_start_of_its_own() -> None:
    """GIVEN an excerpt that opens in a server's serving, with a request's traceback (batch 55's journald tail), then a
    new server's start WHEN read THEN the file holds one start: the earlier server's tail is no boot of its own."""
    tail = (
        b"(APIServer pid=3210) ERROR 02-21 16:58:46 [serving.py:323] Traceback (most recent call last):\n"
        b'(APIServer pid=3210) ERROR 02-21 16:58:46 [serving.py:323]   File "/v/vllm/entrypoints/openai/serving_chat.py"'
        b", line 9, in create_chat_completion\n"
        b"(APIServer pid=3210) ERROR 02-21 16:58:46 [serving.py:323] vllm.exceptions.VLLMValidationError: too long\n"
        b"(APIServer pid=3210) INFO 02-21 19:45:07 [loggers.py:257] Engine 000: Avg prompt throughput: 100.0 tokens/s\n"
    )
    start = b"(APIServer pid=1633) INFO 02-22 06:34:50 [utils.py:233] non-default args: {'model': 'q/q'}\n"
    assert analyze_bytes(tail + start).boots == 1
    # ...while a failure with nothing served is a start of its own (a crash in the first second, then a retry)
    crashed = tail.replace(b"Engine 000: Avg prompt throughput: 100.0 tokens/s", b"Engine core exited")
    assert analyze_bytes(crashed + start).boots == 2
