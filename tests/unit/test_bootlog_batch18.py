"""What blind batch 18 of issue #33 taught the reader (reports/cpu/2026-12-05e-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

RANK3 = b"(VllmWorker rank=3 pid=1564) "
ERROR = RANK3 + b"ERROR 08-06 10:40:29 [multiproc_executor.py:546] "


def _profile_crash(error_line: bytes) -> bytes:
    return (
        RANK3 + b"INFO 08-06 10:40:27 [default_loader.py:262] Loading weights took 35.19 seconds\n"
        + ERROR + b"WorkerProc hit an exception.\n"
        + ERROR + b"Traceback (most recent call last):\n"
        + ERROR + b'  File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker_v1.py", line 155, in '
        b"determine_available_memory\n"
        + ERROR + b"    self.model_runner.profile_run()\n"
        + ERROR + error_line + b"\n"
    )  # fmt: skip


def test_an_error_line_named_by_its_module_and_class_is_the_tracebacks_error() -> None:
    # GIVEN a worker's traceback ending in an exception whose class name says nothing of an error
    # (vllm-ascend#2235: torch.compile in the memory profile)
    line = b"torch._dynamo.exc.Unsupported: Operator does not support running with fake tensors"
    report = analyze_bytes(_profile_crash(line))
    # THEN that line is the failure's error, in the memory profile's step
    assert report.failure is not None and (report.failure.rank, report.failure.phase) == ("rank3", "kv-cache")
    assert report.error == line.decode()


@pytest.mark.parametrize(
    "line",
    [
        b"torch.Size([8, 128])",  # a dotted name and no colon after it
        b"Unsupported: a bare name is no module's class",
        b"torch._dynamo.exc.unsupported: a class is capitalised",
    ],
)
def test_other_lines_do_not_close_the_traceback(line: bytes) -> None:
    report = analyze_bytes(_profile_crash(line))
    assert report.error is not None and report.error.startswith("WorkerProc hit an exception.")


def test_a_dotted_name_and_a_colon_is_no_error_line_outside_a_traceback() -> None:
    # GIVEN a line of that form that is no traceback's (a library's logger naming its class, with a failure word)
    log = (
        b"[2025-08-06 10:40:27 TP0] Load weight begin. avail mem=70.00 GB\n"
        b"transformers.models.auto.AutoConfig: failed to read the generation config, using defaults\n"
    )
    # THEN nothing failed: only a traceback's last line names the exception that ended it
    assert analyze_bytes(log).failure is None


def test_a_traceback_python_says_it_ignored_is_no_failure() -> None:
    # GIVEN the executor's shutdown after a worker died, then a worker's finalizer traceback that Python printed
    # and ignored (vllm-ascend#669: the signal handler's SystemExit in multiprocessing's Finalize)
    rank5 = b"(VllmWorker rank=5 pid=1663) "
    log = (
        rank5 + b"INFO 04-27 01:29:53 [model_runner_v1.py:864] Starting to load model /data/model/Llama4...\n"
        b"CRITICAL 04-27 01:29:53 [multiproc_executor.py:49] MulitprocExecutor got fatal signal from worker "
        b"processes, shutting down. See stack trace above for root cause issue.\n"
        + rank5 + b"Exception ignored in: <Finalize object, dead>\n"
        + rank5 + b"Traceback (most recent call last):\n"
        + rank5 + b'  File "/usr/local/python3.10/lib/python3.10/multiprocessing/util.py", line 224, in __call__\n'
        + rank5 + b"    res = self._callback(*self._args, **self._kwargs)\n"
        + rank5 + b"SystemExit: \n"
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the failure is the executor's, during the load, and the ignored traceback is a warning that says so
    assert report.failure is not None and (report.failure.rank, report.failure.phase) == ("", "load-weights")
    assert report.error is not None and "got fatal signal from worker processes" in report.error
    assert any("(ignored by Python)" in warning for warning in report.warnings)
    # AND the same traceback without Python's words is the worker's failure
    plain = analyze_bytes(log.replace(rank5 + b"Exception ignored in: <Finalize object, dead>\n", b""))
    assert plain.failure is not None and plain.failure.rank == "rank5"
