from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
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
