"""What blind batch 25 of issue #33 taught the reader (reports/cpu/2026-12-05l-bootlog-unseen/), as the smallest log
that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

PREFIX = "(Worker_TP1_EP1 pid=1235611) ERROR 08-19 12:28:29 [multiproc_executor.py:912] "
HEAD = [
    "WorkerProc failed to start.",
    "Traceback (most recent call last):",
    '  File "/vllm/v1/executor/multiproc_executor.py", line 879, in worker_main',
    "    worker = WorkerProc(*args, **kwargs)",
    '  File "/vllm/v1/executor/multiproc_executor.py", line 648, in __init__',
]


def _failure(lines: list[str]) -> tuple[str | None, str | None, str | None]:
    report = analyze_bytes("".join(f"{PREFIX}{line}\n" for line in lines).encode())
    assert report.state == "failed"
    assert report.failure is not None
    return report.failure.rank, report.failure.phase, report.failure.model


@pytest.mark.parametrize(
    ("code", "phase"),
    [
        # a traceback cut below its code line (a Hugging Face thread): the call it makes is the next frame's
        ("    self.worker.load_model()", "load-weights"),
        ("    available_gpu_memory = self.model_executor.determine_available_memory()", "kv-cache"),
        ("    return self.model_runner.capture_model()", "cuda-graph"),
        # a call no frame rule knows says nothing
        ("    output = func(*args, **kwargs)", None),
    ],
)
def test_a_cut_tracebacks_last_code_line_names_the_step(code: str, phase: str | None) -> None:
    assert _failure([*HEAD, code, "    ~~~~~~~~~~~~~~~~~~~~~~^^"])[1:] == (phase, "target" if phase else None)


def test_a_code_line_no_rule_knows_leaves_the_frame_above_it_as_it_read() -> None:
    lines = [
        *HEAD[:2],
        '  File "/vllm/v1/worker/gpu_worker.py", line 1, in compile_or_warm_up_model',
        "    output = func(*args, **kwargs)",
    ]
    assert _failure(lines)[1] == "cuda-graph"


def test_the_frames_below_a_code_line_still_win() -> None:
    # GIVEN the code line's call, then the frames under it, the innermost in the KV cache's sizing
    lines = [
        *HEAD,
        "    self.worker.load_model()",
        '  File "/vllm/v1/worker/gpu_worker.py", line 1, in determine_available_memory',
        "ValueError: No available memory for the cache blocks.",
    ]
    assert _failure(lines) == ("TP1 EP1", "kv-cache", "target")
