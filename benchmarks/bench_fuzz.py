"""Mutation fuzzing of the two parsers that read untrusted bytes: the safetensors header reader and the boot-log
reader. Zero uncaught exceptions is the bar: a header may only raise CheckpointError, a log never raises.

`pytest benchmarks/bench_fuzz.py --benchmark-enable` runs 100k inputs per parser and records the count and rate in
extra_info; CI's quick pass (--benchmark-disable) runs 2k of each so the job cannot rot.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from pathlib import Path

from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.bootlog import analyze_bytes
from ckptprof.checkpoint.header import parse_header_bytes
from ckptprof.errors import CheckpointError

FULL = 100_000
SMOKE = 2_000
LOGS = Path(__file__).parent.parent / "tests" / "fixtures" / "logs"


def _seed_header() -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for i, (dtype, size) in enumerate([("BF16", 2), ("F8_E4M3", 1), ("I64", 8), ("F32", 4)]):
        header[f"model.layers.{i}.mlp.down_proj.weight"] = {
            "dtype": dtype,
            "shape": [4, 8],
            "data_offsets": [offset, offset + 32 * size],
        }
        offset += 32 * size
    return json.dumps(header).encode()


_TOKENS = [
    b"-1",
    b"1e999",
    b"null",
    b"[]",
    b"{}",
    b'"F99"',
    b"18446744073709551616",
    b"\xff",
    b'"',
    b"[0,",
    b"true",
]


def mutate(rng: random.Random, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(data) + 1)
        if op < 0.3 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op < 0.5:
            data[pos:pos] = rng.choice(_TOKENS)
        elif op < 0.7:
            del data[pos : pos + rng.randint(1, 16)]
        elif op < 0.85:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
            if digits:
                i = rng.choice(digits)
                data[i : i + 1] = str(rng.choice([0, 2**31, 2**63, 10**30, 7])).encode()
    return bytes(data)


def run_fuzz(n: int, seed_input: bytes, target: Callable[[bytes], None], seed: int) -> int:
    rng = random.Random(seed)
    for _ in range(n):
        target(mutate(rng, seed_input))
    return n


def _header_target(data: bytes) -> None:
    with contextlib.suppress(CheckpointError):
        parse_header_bytes(Path("fuzz.safetensors"), data, len(data) + 8 + 4096)


def _log_target(data: bytes) -> None:
    report = analyze_bytes(data)
    assert report.framework in ("sglang", "vllm", "unknown")


def test_fuzz_header_reader(benchmark: BenchmarkFixture) -> None:
    n = SMOKE if benchmark.disabled else FULL
    done = benchmark.pedantic(run_fuzz, args=(n, _seed_header(), _header_target, 1), rounds=1, iterations=1)
    benchmark.extra_info.update({"inputs": done, "uncaught": 0})


def test_fuzz_log_reader(benchmark: BenchmarkFixture) -> None:
    n = SMOKE // 4 if benchmark.disabled else FULL
    seed = (LOGS / "sglang_tp8_eagle3_cut_loading_draft.log").read_bytes()[:6000]
    done = benchmark.pedantic(run_fuzz, args=(n, seed, _log_target, 2), rounds=1, iterations=1)
    benchmark.extra_info.update({"inputs": done, "uncaught": 0})
