"""pytest plugin: the ``ckptprof_replay`` fixture, for loading-time regression tests with pytest-benchmark.

    def test_boot(benchmark, ckptprof_replay):
        ckptprof_replay(benchmark, "/data/eagle3/ckpt", cache="cold", tp=8)

Each round prepares the cache in the benchmark's setup (not timed), replays once, and the per-phase figures of
the last round land in ``benchmark.extra_info``. Keep a baseline with ``--benchmark-autosave`` and fail on
regressions with ``--benchmark-compare --benchmark-compare-fail=median:10%``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptprof.results import Verdict


def _replay_under_benchmark(
    benchmark: Any,
    target: str | Path,
    draft: str | Path | None = None,
    cache: str = "warm",
    tp: int = 1,
    devices: str = "cpu",
    rounds: int = 3,
    warmup_rounds: int = 0,
    **replay_kwargs: Any,
) -> Any:
    from ckptprof import api
    from ckptprof.analysis.attribution import run_totals
    from ckptprof.loader.plan import build_plan

    plan = build_plan(target, draft, tp=tp, devices=devices, cache=cache)
    sessions: list[Any] = []

    def setup() -> None:
        for model in plan.models:
            api.prepare_cache(model, cache)

    def one_round() -> None:
        # The cache was put in place by setup(); "as-is" keeps the replay from touching it again.
        sessions.append(
            api.replay(target, draft, tp=tp, devices=devices, cache="as-is", probe=False, **replay_kwargs)
        )

    benchmark.pedantic(one_round, setup=setup, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1)
    session = sessions[-1]
    totals = run_totals(session)
    verdict = session.verdict or Verdict()
    benchmark.extra_info.update(
        {
            "cache": cache,
            "tp": tp,
            "devices": devices,
            "checkpoint_bytes": verdict.checkpoint_bytes,
            "load_wall_s": verdict.load_wall_s,
            "GBps": verdict.achieved_GBps,
            "read_s": round(totals.read_s, 4),
            "deserialize_s": round(totals.deserialize_s, 4),
            "h2d_s": round(totals.h2d_s, 4),
            "other_s": round(totals.other_s, 4),
            "bottleneck": verdict.bottleneck,
            "h2d_stand_in": verdict.h2d_stand_in,
        }
    )
    failed = [r for r in session.ranks if r.status != "ok" or r.error]
    if failed:
        pytest.fail(f"replay failed on rank {failed[0].rank}: {failed[0].error}")
    return session


@pytest.fixture
def ckptprof_replay() -> Callable[..., Any]:
    """Call it as ``ckptprof_replay(benchmark, path, cache="cold", tp=8, draft=None, devices="cpu")``."""
    return _replay_under_benchmark
