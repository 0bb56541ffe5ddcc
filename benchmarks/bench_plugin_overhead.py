"""What the ckptprof_replay fixture times besides the load (issue 37): its median against the load wall.

The fixture keeps its ranks across rounds and times only their release and their results, so pytest-benchmark's
median should sit within a few percent of the session's load wall (``extra_info['load_wall_s']``, the slowest
rank's) and of ``span_s`` (first rank's start to the last rank's end). ``extra_info`` holds both, with
``overhead_s`` (timed minus load wall), ``start_s`` (the last rank's start after the go) and ``gather_s`` (when the
parent heard the last rank say it loaded, after its end), each a median over the rounds.

``CKPTPROF_BENCH_TPS`` (default "1 2") lists the TP sizes, ``CKPTPROF_BENCH_CACHES`` (default "warm cold") the cache
modes, ``CKPTPROF_BENCH_DEVICE`` the device (default cpu; ``cuda:0`` puts every rank on that GPU),
``CKPTPROF_BENCH_CKPT=DIR`` a checkpoint of your own, ``CKPTPROF_BENCH_ROUNDS`` the rounds (default 5).
``benchmarks/gpu/plugin_overhead.sh`` runs it on a GPU at TP1 and TP8 and prints the table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

TPS = [int(tp) for tp in os.environ.get("CKPTPROF_BENCH_TPS", "1 2").split()]
CACHES = os.environ.get("CKPTPROF_BENCH_CACHES", "warm cold").split()
DEVICE = os.environ.get("CKPTPROF_BENCH_DEVICE", "cpu")
EXTERNAL = os.environ.get("CKPTPROF_BENCH_CKPT", "")
ROUNDS = int(os.environ.get("CKPTPROF_BENCH_ROUNDS", "5"))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("tp", TPS)
def test_plugin_times_the_load(
    benchmark: Any, ckptprof_replay: Any, bench_checkpoint_large: Path, tp: int, cache: str
) -> None:
    ckpt = Path(EXTERNAL) if EXTERNAL else bench_checkpoint_large
    session = ckptprof_replay(benchmark, ckpt, cache=cache, tp=tp, devices=DEVICE, rounds=ROUNDS)
    assert all(r.status == "ok" for r in session.ranks)
    assert len(benchmark.extra_info["rounds"]) == (1 if benchmark.disabled else ROUNDS)
