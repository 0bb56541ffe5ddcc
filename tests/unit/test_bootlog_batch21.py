"""What blind batch 21 of issue #33 taught the reader (reports/cpu/2026-12-05i-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

BAR = "Loading safetensors checkpoint shards:  {pct}% Completed | {done}/99 [06:21<21:23, 27.31s/it]"
API_DEATH = [
    "(ApiServer_0 pid=10466) Process ApiServer_0:",
    "(ApiServer_0 pid=10466) Traceback (most recent call last):",
    '(ApiServer_0 pid=10466)   File "/usr/lib/python3.11/site-packages/vllm/v1/engine/core_client.py", line 541, in'
    " __init__",
    "(ApiServer_0 pid=10466)     raise TimeoutError(",
    "(ApiServer_0 pid=10466) TimeoutError: Timed out waiting for engines to send initial message on input socket.",
]
WORKER = "(Worker_DP0_TP0_EP0 pid=10536) INFO 02-27 {time} [default_loader.py:291] "


def _boot(after: list[str]) -> list[str]:
    return [
        WORKER.format(time="14:30:00") + "Starting to load model /models/GLM-5...",
        BAR.format(pct=55, done=54),
        *API_DEATH,
        BAR.format(pct=56, done=55),
        BAR.format(pct=100, done=99),
        WORKER.format(time="15:00:00") + "Loading weights took 1692.49 seconds",
        *after,
    ]


def test_an_api_server_that_died_during_the_load_failed_the_boot_though_the_engine_went_on() -> None:
    # GIVEN vLLM's API servers dying of a timeout while the engine's load crawls, and the engine going on
    # (vllm-ascend#6847: the launcher reports the death only when the engine is done)
    lines = _boot(["RuntimeError: Process ApiServer_0 (PID: 10466) died with exit code 1"])
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    # THEN the first death is the API server's, in the target's load, with its own error
    assert report.state == "failed"
    assert report.failure is not None
    # (an API server is no rank: test_bootlog_batch6)
    assert (report.failure.rank, report.failure.phase, report.failure.model) == ("", "load-weights", "target")
    assert report.error is not None and report.error.startswith("TimeoutError: Timed out waiting for engines")


def test_a_process_that_died_before_the_server_came_up_was_no_failure_of_it() -> None:
    # GIVEN the same death, then the server up (a helper process, restarted or not needed)
    lines = _boot(["(APIServer pid=1) INFO 02-27 15:10:00 [launcher.py:1] Application startup complete."])
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    assert report.state == "ready"


def test_a_traceback_a_process_survived_is_still_only_a_warning() -> None:
    # GIVEN the same traceback with no `Process NAME:` line above it: nothing says its process exited
    lines = [line for line in _boot([]) if not line.endswith("Process ApiServer_0:")]
    lines = [line.replace("ApiServer_0 pid=10466", "APIServer pid=1") for line in lines]
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    assert report.state == "load-weights"
