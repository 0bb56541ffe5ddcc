"""What blind batch 27 of issue #33 taught the reader (reports/cpu/2026-12-05o-bootlog-unseen/), as the smallest log
that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

TIMEOUT = [
    "Traceback (most recent call last):",
    '  File "/sglang/python/sglang/srt/utils/common.py", line 2520, in retry',
    "    return fn()",
    "TimeoutError: The read operation timed out",
]
RETRIED = (
    "[2026-03-27 20:55:24] retry() failed once (0th try, maximum 2 retries). Will delay 0.92s and retry. "
    "Error: The read operation timed out"
)
CONFIG = "[2026-03-27 20:55:25] server_args=ServerArgs(model_path='meta-llama/Meta-Llama-3.1-8B-Instruct', tp_size=1)"
BOOT = [
    CONFIG,
    "[2026-03-27 20:55:30 TP0] Load weight begin. avail mem=78.00 GB",
    "[2026-03-27 20:55:35 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.00 GB",
    "[2026-03-27 20:56:08] The server is fired up and ready to roll!",
]


def _read(lines: list[str]) -> tuple[int, str, tuple[str, ...]]:
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    return report.boots, report.state, report.warnings


def test_tracebacks_sglang_retried_before_its_configuration_are_no_boot_of_their_own() -> None:
    # GIVEN SGLang's docs build: two Hugging Face timeouts that retry() printed and retried, then the server's boot
    boots, state, warnings = _read([*TIMEOUT, RETRIED, *TIMEOUT, RETRIED, *BOOT])
    # THEN one boot, ready, and the timeouts listed as retried
    assert (boots, state) == (1, "ready")
    assert any("(retried)" in warning and "TimeoutError" in warning for warning in warnings)


def test_a_traceback_no_one_retried_before_the_configuration_is_still_a_boot_of_its_own() -> None:
    boots, _, _ = _read([*TIMEOUT, *BOOT])
    assert boots == 2


@pytest.mark.parametrize("retried", [True, False])
def test_a_retried_try_is_no_failure_of_a_boot_that_went_no_further(retried: bool) -> None:
    # GIVEN a server that loaded, then a download that timed out (retried or not), and nothing after it
    lines = [*BOOT[:3], *TIMEOUT, *([RETRIED] if retried else [])]
    _, state, _ = _read(lines)
    assert state == ("load-weights" if retried else "failed")


def test_every_traceback_of_a_retried_try_is_retried() -> None:
    # GIVEN a try whose chain of tracebacks is not linked (a paste that hides their error lines: a quoted, indented copy)
    cut = TIMEOUT[:3]
    boots, state, warnings = _read([*cut, *cut, *cut, RETRIED, *BOOT])
    # THEN the whole chain was the retried try: one boot
    assert (boots, state) == (1, "ready")
    assert not any("the boot went on" in warning for warning in warnings)
