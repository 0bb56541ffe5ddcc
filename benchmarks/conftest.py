from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize

FULL_BYTES = 256_000_000
SMOKE_BYTES = 8_000_000


@pytest.fixture(scope="session")
def bench_checkpoint(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A 64-shard EAGLE-3 draft: 256 MB when benchmarking, 8 MB under --benchmark-disable (CI's quick pass)."""
    disabled = request.config.getoption("benchmark_disable", default=False)
    out = tmp_path_factory.mktemp("bench") / "eagle3"
    synthesize(
        out,
        preset="eagle3-draft",
        shards=16 if disabled else 64,
        size=SMOKE_BYTES if disabled else FULL_BYTES,
    )
    return out
