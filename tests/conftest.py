from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from ckptprof.checkpoint.synth import synthesize
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import ModelPlan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies import get_strategy, param_digests
from ckptprof.loader.strategies.base import LoadContext

# Every test (and every ckptprof process a test starts) measures its own ceilings and writes nothing into the
# user's cache: a probe kept by one test would otherwise stand in for the next test's (tests of reuse opt in).
os.environ["CKPTPROF_PROBE_MAX_AGE_S"] = "0"
os.environ["CKPTPROF_CACHE"] = tempfile.mkdtemp(prefix="ckptprof-test-cache-")

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]


def _sglang_digests(models: list[ModelPlan], tp: int, rank: int) -> dict[str, str]:
    """The default strategy's values for one rank, loaded on CPU in this process."""
    ctx = LoadContext(rank=rank, tp=tp, device=torch.device("cpu"))
    for m in models:
        ctx.allocate(m)
    rec = Recorder(copy_timer=HostCopyTimer())
    strategy = get_strategy("sglang")
    threads = torch.get_num_threads()
    try:
        for m in models:
            with rec.model(m.role):
                strategy.load_model(ctx, m, rec)
    finally:
        torch.set_num_threads(threads)  # the load pins torch to one thread, as SGLang does
    return param_digests(ctx)


@pytest.fixture(scope="session")
def sglang_digests() -> Digests:
    """What every strategy and every device must end with: ``sglang_digests(plan.models, tp, rank)``."""
    return _sglang_digests


@pytest.fixture(scope="session")
def small_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small EAGLE-3-shaped checkpoint: 8 shards, 16 MB. Read-only by convention: tests never modify it."""
    out = tmp_path_factory.mktemp("ckpt") / "eagle3"
    synthesize(out, preset="eagle3-draft", shards=8, size=16_000_000, seed=1)
    return out


@pytest.fixture(scope="session")
def small_verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ckpt") / "verifier"
    synthesize(out, preset="kimi-k2.5-verifier", shards=6, size=24_000_000, seed=2, layers=3, experts=4)
    return out


# -- the engines' packages: the stand-ins written here, or (in the engine tier, .ci/engines.sh) the real ones -------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# "sglang==0.5.23": the engine tier runs this suite with that real release on the path; the stand-in of that engine
# steps aside, and the tests that used it hold the real package to the same expectations.
REAL_ENGINE = os.environ.get("CKPTPROF_REAL_ENGINE", "")


@dataclass(frozen=True)
class EnginePackage:
    """The ``sglang`` or ``vllm`` the faithful path's tests drive."""

    package: str
    version: str
    real: bool
    standin: (
        Path | None
    )  # the stand-in's folder to put first on the path; None: the real package is there already
    calls_variable: str  # the stand-in appends each call of its functions to the file this variable names

    def env(self, calls: Path) -> dict[str, str]:
        """The environment of a ckptprof process that should find this package."""
        env = dict(os.environ)
        if self.standin is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(self.standin), env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            )
            env[self.calls_variable] = str(calls)
        return env

    def calls(self, path: Path) -> list[dict[str, object]] | None:
        """The stand-in's recorded calls (None for the real package, which records nothing)."""
        if self.real:
            return None
        import json

        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def engine_package(package: str, standin_version: str) -> EnginePackage:
    name, _, version = REAL_ENGINE.partition("==")
    if name == package:
        import importlib.metadata

        try:
            found = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"CKPTPROF_REAL_ENGINE={REAL_ENGINE} but {package} is not installed on this path")
        if version and found != version:
            pytest.fail(f"CKPTPROF_REAL_ENGINE={REAL_ENGINE} but {package} {found} is installed on this path")
        return EnginePackage(package, found, True, None, "")
    return EnginePackage(
        package,
        standin_version,
        False,
        FIXTURES / f"{package}_standin",
        f"CKPTPROF_TEST_{package.upper()}_CALLS",
    )


@pytest.fixture(scope="session")
def real_engine_package() -> EnginePackage:
    """The real release CKPTPROF_REAL_ENGINE names (the engine tier); fails when it is not on the path."""
    return engine_package(REAL_ENGINE.partition("==")[0], "")


@pytest.fixture
def sglang_package() -> EnginePackage:
    return engine_package("sglang", "0.5.23")


@pytest.fixture
def vllm_package() -> EnginePackage:
    return engine_package("vllm", "0.33.0")
