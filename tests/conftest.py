from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize


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
