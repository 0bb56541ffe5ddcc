"""The ckptprof_replay fixture, used the way a user's regression test would use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.analysis.verdict import BOTTLENECKS

pytest_plugins = ["pytester"]


def test_user_style_benchmark_records_phases(pytester: pytest.Pytester, small_draft: Path) -> None:
    pytester.makepyfile(
        test_boot=f"""
        def test_boot(benchmark, ckptprof_replay):
            ckptprof_replay(benchmark, {str(small_draft)!r}, cache="cold", tp=2, rounds=2)
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "bench.json").read_text())
    (bench,) = data["benchmarks"]
    info = bench["extra_info"]
    assert info["cache"] == "cold" and info["tp"] == 2
    assert info["read_s"] > 0 and info["h2d_s"] > 0 and info["load_wall_s"] > 0
    assert info["bottleneck"] in BOTTLENECKS
    assert bench["stats"]["rounds"] == 2


def test_each_round_prepares_the_cache_then_replays_once_and_reports_the_last(
    pytester: pytest.Pytester, small_draft: Path
) -> None:
    # GIVEN a user's test that watches what the fixture asks of ckptprof's API
    pytester.makepyfile(
        test_boot=f"""
        import json

        from ckptprof import api
        from ckptprof.analysis.attribution import run_totals


        def test_boot(benchmark, ckptprof_replay, monkeypatch):
            calls, sessions = [], []
            prepare, replay = api.prepare_cache, api.replay

            def watched_prepare(model, cache):
                calls.append(["prepare", model.role, cache])
                return prepare(model, cache)

            def watched_replay(*args, **kwargs):
                calls.append(["replay", kwargs["cache"], kwargs["probe"]])
                sessions.append(replay(*args, **kwargs))
                return sessions[-1]

            monkeypatch.setattr(api, "prepare_cache", watched_prepare)
            monkeypatch.setattr(api, "replay", watched_replay)
            got = ckptprof_replay(benchmark, {str(small_draft)!r}, cache="cold", rounds=2)
            assert got is sessions[-1]
            seen = {{"calls": calls, "load_wall_s": got.verdict.load_wall_s,
                     "read_s": round(run_totals(got).read_s, 4), "bottleneck": got.verdict.bottleneck}}
            with open("seen.json", "w") as fh:
                json.dump(seen, fh)
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    seen = json.loads((pytester.path / "seen.json").read_text())
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    # THEN each round dropped the cache first and then replayed once, asking the replay to leave the cache as the
    # setup made it ("as-is": the replay only looks, with a prepare of its own that changes nothing) and to probe
    # nothing (a probe inside the timed round would be timed too)
    one_round = [["prepare", "target", "cold"], ["replay", "as-is", False], ["prepare", "target", "as-is"]]
    assert seen["calls"] == one_round * 2
    assert bench["stats"]["rounds"] == 2
    # AND the figures the benchmark keeps are the returned session's: the last round's
    info = bench["extra_info"]
    assert (info["load_wall_s"], info["read_s"], info["bottleneck"]) == (
        seen["load_wall_s"],
        seen["read_s"],
        seen["bottleneck"],
    )


def test_a_failed_rank_fails_the_users_test_naming_it(pytester: pytest.Pytester, small_draft: Path) -> None:
    # GIVEN a replay whose rank 1 failed (its session says so; the replay itself returns normally)
    pytester.makepyfile(
        test_boot=f"""
        from ckptprof import api
        from ckptprof.session import RankResult, Session


        def test_boot(benchmark, ckptprof_replay, monkeypatch):
            failed = Session(ranks=[RankResult(rank=0, device="cpu"),
                                    RankResult(rank=1, device="cpu", status="failed", error="CUDA out of memory")])
            monkeypatch.setattr(api, "replay", lambda *args, **kwargs: failed)
            ckptprof_replay(benchmark, {str(small_draft)!r}, rounds=1)
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--benchmark-disable")
    # THEN the fixture fails the test and says which rank failed and why (no benchmark of a failed load passes)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Failed: replay failed on rank 1: CUDA out of memory*"])
