"""How long `Session.load` takes on a large session (issue 38): 8 ranks x 2 models, 3,000 shard timings.

A TP8 EAGLE-3 run (a 350-shard target, a 25-shard draft) writes 8 x 375 = 3,000 shard timings, each with every
field a current ckptprof writes (threads, work and queue time), plus the models' shard lists, ceilings, a verdict
with predictions and the extra results (a strategy comparison, prediction checks, stage times). The document is
built as the JSON contract spells it (docs/json-contract.md), not through the data model, so the same file is timed
before and after a change to how sessions are read.

``test_load`` times the whole load (read, parse, validate, build the objects), ``test_validate`` only the checks of
a parsed document. ``python benchmarks/bench_session_load.py`` (ckptprof installed, or PYTHONPATH=.) prints both
(medians of 15, wall and CPU time) without pytest.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.session import Session

RANKS = 8
TARGET_SHARDS = 350
DRAFT_SHARDS = 25
SHARD_BYTES = 73_400_000


def _shard_timing(rng: random.Random, file: str, start: float) -> dict[str, Any]:
    read = rng.uniform(0.02, 0.2)
    deserialize = rng.uniform(0.001, 0.01)
    h2d = rng.uniform(0.005, 0.03)
    wall = read + deserialize + h2d + rng.uniform(0.0, 0.01)
    return {
        "file": file,
        "bytes": SHARD_BYTES,
        "storage_bytes": SHARD_BYTES + rng.randrange(0, 4096),
        "nonresident_bytes": SHARD_BYTES,
        "major_faults": rng.randrange(0, 20_000),
        "read_s": read,
        "deserialize_s": deserialize,
        "h2d_s": h2d,
        "h2d_bytes": SHARD_BYTES // RANKS,
        "wall_s": wall,
        "start_s": start,
        "tensors": rng.randrange(1, 12),
        "status": "ok",
        "error": None,
        "work_s": wall * 0.95,
        "queued_s": wall * 0.05,
        "threads": ["MainThread", "ThreadPoolExecutor-0_1"],
    }


def _files(role: str, count: int) -> list[str]:
    return [f"{role}-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]


def _rank_model(rng: random.Random, role: str, files: list[str]) -> dict[str, Any]:
    shards, start = [], 0.0
    for file in files:
        shard = _shard_timing(rng, file, start)
        start += shard["wall_s"]
        shards.append(shard)
    return {
        "role": role,
        "wall_s": start,
        "start_s": 0.0,
        "shards": shards,
        "faithful_wall_s": start * 0.98,
        "faithful_storage_bytes": SHARD_BYTES * len(files),
        "faithful_disk_read_bytes": SHARD_BYTES * len(files),
        "faithful_walls": [start * 0.98, start * 0.99, start * 0.97],
        "decomposed_walls": [start, start * 1.01, start * 0.99],
        "disk": "nvme0n1",
        "disk_busy_s": start * 0.9,
        "disk_read_bytes": SHARD_BYTES * len(files),
        "faithful_disk_busy_s": start * 0.88,
        "faithful_sampled_shares": {"storage": 0.61, "page_cache": 0.05, "cpu": 0.3, "waiting": 0.04},
        "faithful_copy_s": start * 0.1,
        "faithful_sampled_copy_shares": {"storage": 0.01, "page_cache": 0.0, "cpu": 0.08, "waiting": 0.01},
        "busy_s": {
            "read": start * 0.8,
            "deserialize": start * 0.05,
            "h2d": start * 0.15,
            "any": start * 0.99,
        },
        "wall_parts_s": {
            "read": start * 0.8,
            "deserialize": start * 0.04,
            "h2d": start * 0.15,
            "other": 0.01,
        },
    }


def session_document(seed: int = 38) -> dict[str, Any]:
    """The session of a TP8 EAGLE-3 run, as `ckptprof run --json` writes it."""
    rng = random.Random(seed)
    roles = {"target": _files("model", TARGET_SHARDS), "draft": _files("draft", DRAFT_SHARDS)}
    devices = [f"cuda:{r}" for r in range(RANKS)]
    release = {"version": "0.5.4", "line": "0.5", "default_load_format": "auto", "multithread": True}
    return {
        "schema_version": 1,
        "config": {
            "tp": RANKS,
            "devices": devices,
            "rank_devices": devices,
            "ranks_share_devices": False,
            "cache": "cold",
            "order": "sorted",
            "strategy": "sglang-mt",
            "strategy_params": {"threads": 8},
            "verify": False,
            "faithful": True,
            "expert_parallel": False,
            "launcher": "spawn",
            "faithful_rounds": 3,
            "sample_threads": True,
            "faithful_source": "SGLang's own iterator (sglang 0.5.4, installed here)",
            "strategy_flags": "--model-loader-extra-config '{\"enable_multithread_load\": true}'",
            "sglang_release": release,
        },
        "models": [
            {
                "role": role,
                "path": f"/mnt/ckpt/{role}",
                "fs_type": "ext4",
                "total_bytes": SHARD_BYTES * len(files),
                "shards": [{"file": f, "bytes": SHARD_BYTES, "tensors": 7} for f in files],
                "resident_bytes_before": 0,
                "cache_note": "dropped",
            }
            for role, files in roles.items()
        ],
        "ranks": [
            {
                "rank": rank,
                "device": devices[rank],
                "status": "ok",
                "error": None,
                "host": "h200-node-1",
                "pid": 4000 + rank,
                "models": [_rank_model(rng, role, files) for role, files in roles.items()],
                "wall_s": 40.0 + rng.uniform(0, 2),
                "cpu_user_s": 12.0,
                "cpu_sys_s": 8.0,
                "peak_rss_bytes": 1_600_000_000,
                "rss_before_load_bytes": 640_000_000,
                "load_peak_rss_bytes": 1_600_000_000,
                "param_bytes": SHARD_BYTES * TARGET_SHARDS // RANKS,
                "started_monotonic": 1234.5 + rank,
                "checksums": None,
                "engine_import_s": 9.5,
                "engine_output": None,
                "stuck": None,
            }
            for rank in range(RANKS)
        ],
        "ceilings": {
            "storage_read_GBps": 1.8,
            "storage_read_1_stream_GBps": 1.4,
            "storage_read_n_streams_GBps": 1.8,
            "storage_streams": 8,
            "page_cache_read_GBps": 7.1,
            "h2d_pageable_GBps": {d: 8.7 for d in devices},
            "h2d_pinned_GBps": {d: 55.2 for d in devices},
            "warm_pipeline_GBps": 30.1,
            "notes": [],
        },
        "verdict": {
            "bottleneck": "storage",
            "close": [],
            "shares": {"storage": 0.9, "page_cache": 0.0, "deserialize": 0.02, "h2d": 0.07, "other": 0.01},
            "summary": "storage binds: 1.4 GB/s of a 1.8 GB/s ceiling",
            "recommendations": ["--load-format prefetch: 20.1 s"],
            "predictions": [
                {"flags": "--x", "predicted_s": 20.1, "why": "storage at its ceiling", "strategy": "prefetch"}
            ],
            "achieved_GBps": 1.4,
            "load_wall_s": 41.0,
            "checkpoint_bytes": SHARD_BYTES * (TARGET_SHARDS + DRAFT_SHARDS),
            "read_amplification": 8.0,
            "rank_skew": 1.04,
            "faithful_delta": 0.012,
            "floor_s": 15.3,
        },
        "environment": {"host": "h200-node-1", "python": "3.12.3", "cpu_count": 192, "cuda_available": True},
        "notes": ["the page cache was dropped before the load"],
        "artifacts": {},
        "extra": {
            "stages_s": {"plan": 0.4, "probe": 12.0, "ranks": 41.5},
            "prediction_check": [
                {"flags": "--x", "predicted_s": 20.1, "measured_s": 21.0, "baseline_s": 41.0, "error": -0.04}
            ],
            "strategies": {
                "rows": [
                    {"strategy": "sglang", "params": {}, "flags": "", "status": "ok", "wall_s": 41.0},
                    {"strategy": "prefetch", "params": {}, "flags": "--x", "status": "ok", "wall_s": 21.0},
                ],
                "fastest": "prefetch",
                "summary": "prefetch is fastest",
                "warnings": [],
            },
        },
        "created": "2026-12-02T21:00:00+00:00",
    }


def shard_timings(document: dict[str, Any]) -> int:
    return sum(len(m["shards"]) for r in document["ranks"] for m in r["models"])


@pytest.fixture(scope="module")
def session_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench-session") / "session.json"
    document = session_document()
    assert shard_timings(document) == 3_000
    path.write_text(json.dumps(document, indent=1))
    return path


def test_load(benchmark: BenchmarkFixture, session_file: Path) -> None:
    session = benchmark(Session.load, session_file)
    assert sum(len(m.shards) for r in session.ranks for m in r.models) == 3_000


def test_validate(benchmark: BenchmarkFixture, session_file: Path) -> None:
    document = json.loads(session_file.read_text())
    session = benchmark(Session.from_dict, document)
    assert len(session.ranks) == RANKS


def _median_s(fn: Any, rounds: int = 15, clock: Any = time.perf_counter) -> float:
    times = []
    for _ in range(rounds):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _both(fn: Any) -> str:
    """Wall and CPU time: on a shared machine the CPU time is the steadier figure."""
    return f"{_median_s(fn) * 1e3:.1f} ms wall, {_median_s(fn, clock=time.process_time) * 1e3:.1f} ms CPU"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.json"
        document = session_document()
        path.write_text(json.dumps(document, indent=1))
        parsed = json.loads(path.read_text())
        print(f"{shard_timings(document)} shard timings, {path.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
        print(f"Session.load:      {_both(lambda: Session.load(path))}")
        print(f"Session.from_dict: {_both(lambda: Session.from_dict(parsed))}")
        print(f"json.loads alone:  {_both(lambda: json.loads(path.read_text()))}")
