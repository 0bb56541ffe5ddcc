"""ruff (lint + format) and mypy are part of the test run, so `pytest` alone proves the code is clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "cmd",
    [
        ("ruff", "check", "ckptprof", "tests", "benchmarks"),
        ("ruff", "format", "--check", "ckptprof", "tests", "benchmarks"),
    ],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff(cmd: tuple[str, ...]) -> None:
    if shutil.which("ruff") is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    proc = _run(*cmd)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy() -> None:
    proc = _run(sys.executable, "-m", "mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
