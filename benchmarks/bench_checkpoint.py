"""Writing synthetic checkpoints (should run at disk speed) and reading headers (inspect's whole cost).

Each benchmark asserts what it counts (every byte written and described by a valid header, every shard read) and
holds its time to a bound as a ratio against a reference timed alongside in the same run, rounds interleaved: a
plain write of the same bytes for `synth`, the same header bytes read and parsed by plain ``json.loads`` for the
header reader, and the header reads alone for `inspect`. The ratios are asserted under ``--benchmark-disable``
too (CI's quick pass, on small checkpoints); absolute figures go to ``extra_info`` when benchmarking.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.checkpoint.header import ShardHeader, read_header
from ckptprof.checkpoint.inspection import inspect_checkpoint
from ckptprof.checkpoint.synth import synthesize

# Measured on the shared 2-core VM (2026-12), medians of per-round ratios: synth / plain write 1.1-1.25 at 400 MB
# (0.5-2 for single 4 MB rounds); read_header / (read + json.loads) 3.6-3.9, 7.5 on a machine busy with other
# work; inspect / read_header of every shard 1.8-2.2. Bounds generous for the noise, meaningful for a regression:
# synth that no longer runs near disk speed, a validator several times its cost, inspect doing far more than
# reading the headers.
SYNTH_WITHIN = 3.0
HEADER_WITHIN = 10.0
INSPECT_WITHIN = 5.0


def paired_median(run: Callable[[], object], reference: Callable[[], object], rounds: int) -> float:
    """The median over ``rounds`` of ``run``'s time over ``reference``'s in the same round (their order alternates)."""
    ratios = []
    for i in range(rounds):
        seconds = {}
        for name, fn in (
            (("run", run), ("reference", reference)) if i % 2 else (("reference", reference), ("run", run))
        ):
            t0 = time.perf_counter()
            fn()
            seconds[name] = time.perf_counter() - t0
        ratios.append(seconds["run"] / max(seconds["reference"], 1e-9))
    return statistics.median(ratios)


def _plain_write(folder: Path, sizes: list[int]) -> None:
    """The reference for synth: files of the same sizes, written from one buffer and fsynced as synth does."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    block = os.urandom(1 << 20)
    paths = []
    for i, size in enumerate(sizes):
        path = folder / f"{i}.bin"
        with open(path, "wb") as fh:
            for start in range(0, size, len(block)):
                fh.write(block[: min(len(block), size - start)])
        paths.append(path)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _assert_whole(headers: list[ShardHeader], files: list[Path]) -> None:
    """Counted: a valid header per file, and each file is its header plus exactly the tensors it describes."""
    assert [h.path for h in headers] == files
    for h in headers:
        assert h.file_size == h.path.stat().st_size == h.data_start + h.tensor_bytes, h.path


def test_synth_throughput(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    size = 4_000_000 if benchmark.disabled else 400_000_000
    out = tmp_path / "s"

    def write() -> int:
        shutil.rmtree(out, ignore_errors=True)
        return synthesize(out, shards=16, size=size).total_bytes

    written = benchmark.pedantic(write, rounds=1 if benchmark.disabled else 3, iterations=1)
    files = sorted(out.glob("*.safetensors"))
    headers = [read_header(f) for f in files]
    # Counted: 16 shards, each a valid safetensors file; the bytes synth says it wrote are the tensors' bytes, and
    # the index maps every tensor to the shard that holds it
    assert len(files) == 16
    _assert_whole(headers, files)
    assert written == sum(h.tensor_bytes for h in headers)
    weight_map = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    assert weight_map == {name: h.path.name for h in headers for name in h.tensors}
    sizes = [f.stat().st_size for f in files]
    ratio = paired_median(
        write, lambda: _plain_write(tmp_path / "plain", sizes), rounds=3 if size > 10**8 else 5
    )
    benchmark.extra_info["synth_over_plain_write"] = round(ratio, 3)
    if not benchmark.disabled:
        benchmark.extra_info["MBps"] = round(written / benchmark.stats.stats.median / 1e6, 1)
    assert ratio <= SYNTH_WITHIN, benchmark.extra_info


def _read_and_json_loads(files: list[Path]) -> None:
    """The reference for the header reader: the same header bytes read and parsed by json.loads, no checks."""
    for f in files:
        with open(f, "rb") as fh:
            length = int.from_bytes(fh.read(8), "little")
            json.loads(fh.read(length))


def test_header_parsing(benchmark: BenchmarkFixture, bench_checkpoint: Path) -> None:
    files = sorted(bench_checkpoint.glob("*.safetensors"))
    headers = benchmark(lambda: [read_header(f) for f in files])
    _assert_whole(headers, files)
    ratio = paired_median(
        lambda: [read_header(f) for f in files], lambda: _read_and_json_loads(files), rounds=21
    )
    benchmark.extra_info["read_header_over_json_loads"] = round(ratio, 3)
    if not benchmark.disabled:
        benchmark.extra_info["shards_per_s"] = round(len(files) / benchmark.stats.stats.median, 1)
    assert ratio <= HEADER_WITHIN, benchmark.extra_info


def test_inspect(benchmark: BenchmarkFixture, bench_checkpoint: Path) -> None:
    result = benchmark(lambda: inspect_checkpoint(bench_checkpoint))
    files = sorted(bench_checkpoint.glob("*.safetensors"))
    # Counted: every shard read, none refused, and the total is the files' own sizes
    assert not result.errors
    _assert_whole(sorted(result.headers, key=lambda h: h.path), files)
    assert result.total_bytes == sum(f.stat().st_size for f in files)
    ratio = paired_median(
        lambda: inspect_checkpoint(bench_checkpoint), lambda: [read_header(f) for f in files], rounds=21
    )
    benchmark.extra_info["inspect_over_read_header"] = round(ratio, 3)
    assert ratio <= INSPECT_WITHIN, benchmark.extra_info
