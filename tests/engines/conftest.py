"""The engine tier: ckptprof's faithful path driven through a real SGLang or vLLM release (``.ci/engines.sh``).

``CKPTPROF_REAL_ENGINE=sglang==0.5.23`` names the release on the path; without it every test here skips (a user's
machine, the README's test command). With it, a release that is missing or of another version fails the tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from engine_runs import Engine, Run, RunFactory

from ckptprof.checkpoint.synth import synthesize

if TYPE_CHECKING:
    from conftest import EnginePackage

REAL_ENGINE = os.environ.get("CKPTPROF_REAL_ENGINE", "")


@pytest.fixture(scope="session")
def engine(real_engine_package: EnginePackage) -> Engine:
    package = real_engine_package
    if not package.real:
        pytest.fail(f"CKPTPROF_REAL_ENGINE={REAL_ENGINE!r} names no engine (sglang==X or vllm==X)")
    return Engine(package.package, package.version, {"sglang": "SGLang", "vllm": "vLLM"}[package.package])


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A target and an EAGLE-3 draft, small enough for a TP2 run of several passes on two cores."""
    root = tmp_path_factory.mktemp("engine-ckpt")
    target, draft = root / "target", root / "draft"
    synthesize(target, preset="kimi-k2.5-verifier", shards=6, size=64_000_000, seed=5, layers=3, experts=4)
    synthesize(draft, preset="eagle3-draft", shards=8, size=48_000_000, seed=6)
    return target, draft


@pytest.fixture(scope="session")
def run_ckptprof(
    tmp_path_factory: pytest.TempPathFactory, checkpoints: tuple[Path, Path], engine: Engine
) -> RunFactory:
    """``run_ckptprof(*flags)``: a TP2 target + draft faithful run on the CPU through the engine's own iterator."""

    def run(*flags: str) -> Run:
        out = tmp_path_factory.mktemp("run")
        target, draft = checkpoints
        argv = [str(target), "--draft", str(draft), "--tp", "2", "--no-probe", "--faithful", *engine.argv()]
        argv += [*flags, "-o", str(out / "run"), "--json", str(out / "session.json")]
        done = subprocess.run(
            [sys.executable, "-m", "ckptprof", "run", *argv],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"ckptprof run {' '.join(argv)} failed:\n{done.stderr[-4000:]}"
        session = json.loads((out / "session.json").read_text())
        return Run(argv, done.stdout, done.stderr, session)

    return run
