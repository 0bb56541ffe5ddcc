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


LARGE_BYTES = 1_000_000_000


@pytest.fixture(scope="session")
def bench_checkpoint_large(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """1 GB in 16 shards of ~60 MB: per-shard costs weigh as on the H200 runs (4.7 GB, 64 shards of ~73 MB),
    unlike the 64 shards of ~4 MB above. 8 MB in 4 shards under --benchmark-disable."""
    disabled = request.config.getoption("benchmark_disable", default=False)
    out = tmp_path_factory.mktemp("bench-large") / "eagle3"
    synthesize(
        out,
        preset="eagle3-draft",
        shards=4 if disabled else 16,
        size=SMOKE_BYTES if disabled else LARGE_BYTES,
    )
    return out
