from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize

FULL_BYTES = 256_000_000
LARGE_BYTES = 1_000_000_000
SMOKE_BYTES = 8_000_000


def _draft(request: pytest.FixtureRequest, folder: Path, full: tuple[int, int], smoke_shards: int) -> Path:
    """An EAGLE-3 draft of ``full`` = (shards, bytes) when benchmarking; SMOKE_BYTES in ``smoke_shards`` shards
    under --benchmark-disable (CI's quick pass)."""
    disabled = request.config.getoption("benchmark_disable", default=False)
    shards, size = (smoke_shards, SMOKE_BYTES) if disabled else full
    out = folder / "eagle3"
    synthesize(out, preset="eagle3-draft", shards=shards, size=size)
    return out


@pytest.fixture(scope="session")
def bench_checkpoint(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A 64-shard EAGLE-3 draft: 256 MB when benchmarking, 8 MB in 16 shards under --benchmark-disable."""
    return _draft(request, tmp_path_factory.mktemp("bench"), (64, FULL_BYTES), smoke_shards=16)


@pytest.fixture(scope="session")
def bench_checkpoint_large(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """1 GB in 16 shards of ~60 MB: per-shard costs weigh as on the H200 runs (4.7 GB, 64 shards of ~73 MB),
    unlike the 64 shards of ~4 MB above. 8 MB in 4 shards under --benchmark-disable."""
    return _draft(request, tmp_path_factory.mktemp("bench-large"), (16, LARGE_BYTES), smoke_shards=4)
