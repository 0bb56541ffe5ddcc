"""What blind batch 24 of issue #33 taught the reader (reports/cpu/2026-12-05m-bootlog-unseen/), as the smallest log
that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

BOOT = [
    "INFO 01-16 18:11:58 model_runner.py:1077] Loading model weights took 2.0512 GB",
    "INFO 01-16 18:11:59 gpu_executor.py:113] # GPU blocks: 20671, # CPU blocks: 11915",
]
ENGINE_DIED = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1, in build_async',
    '    raise RuntimeError("Engine process failed to start. See stack trace for the root cause.")',
    "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
]


def _unretrieved(kind: str) -> list[str]:
    return [
        f"{kind} exception was never retrieved",
        f"future: <{kind} finished name='Task-2' coro=<MQLLMEngineClient.run_output_handler_loop() done, defined at "
        "/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/client.py:178> "
        "exception=ZMQError('Operation not supported')>",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/zmq/_future.py", line 400, in poll',
        "    raise _zmq.ZMQError(_zmq.ENOTSUP)",
        "zmq.error.ZMQError: Operation not supported",
    ]


@pytest.mark.parametrize("kind", ["Task", "Future"])
def test_an_exception_asyncio_says_no_one_retrieved_is_not_the_death(kind: str) -> None:
    # GIVEN a V0 engine that died with no word, its client's output loops' unretrieved ZMQErrors, then the front end's
    # own error (batch 24's Kubernetes pod)
    lines = [*BOOT, *_unretrieved(kind), *_unretrieved(kind), *ENGINE_DIED]
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    # THEN the failure is the front end's, and the tasks' errors are listed as ignored
    assert report.state == "failed"
    assert report.error == ENGINE_DIED[-1]
    assert any("ignored" in warning and "ZMQError" in warning for warning in report.warnings)


def test_an_unretrieved_task_exception_alone_fails_no_boot() -> None:
    lines = [*BOOT, *_unretrieved("Task")]
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    assert report.state == "kv-cache"
