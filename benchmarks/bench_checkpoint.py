"""Writing synthetic checkpoints (should run at disk speed) and reading headers (inspect's whole cost)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.checkpoint.header import read_header
from ckptprof.checkpoint.inspection import inspect_checkpoint
from ckptprof.checkpoint.synth import synthesize


def test_synth_throughput(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    size = 4_000_000 if benchmark.disabled else 400_000_000
    out = tmp_path / "s"

    def write() -> int:
        shutil.rmtree(out, ignore_errors=True)
        return synthesize(out, shards=16, size=size).total_bytes

    written = benchmark.pedantic(write, rounds=1 if benchmark.disabled else 3, iterations=1)
    if not benchmark.disabled:
        benchmark.extra_info["MBps"] = round(written / benchmark.stats.stats.median / 1e6, 1)


def test_header_parsing(benchmark: BenchmarkFixture, bench_checkpoint: Path) -> None:
    files = sorted(bench_checkpoint.glob("*.safetensors"))
    headers = benchmark(lambda: [read_header(f) for f in files])
    assert len(headers) == len(files)
    if not benchmark.disabled:
        benchmark.extra_info["shards_per_s"] = round(len(files) / benchmark.stats.stats.median, 1)


def test_inspect(benchmark: BenchmarkFixture, bench_checkpoint: Path) -> None:
    result = benchmark(lambda: inspect_checkpoint(bench_checkpoint))
    assert not result.errors
