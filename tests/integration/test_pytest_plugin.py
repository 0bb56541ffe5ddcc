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


def test_regression_gate_fails_the_run(pytester: pytest.Pytester, small_draft: Path) -> None:
    # GIVEN a saved baseline that was impossibly fast
    pytester.makepyfile(
        test_boot=f"""
        def test_boot(benchmark, ckptprof_replay):
            ckptprof_replay(benchmark, {str(small_draft)!r}, cache="warm", rounds=1)
        """
    )
    first = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "--benchmark-autosave", "--benchmark-storage=store"
    )
    first.assert_outcomes(passed=1)
    saved = next((pytester.path / "store").rglob("*.json"))
    doc = json.loads(saved.read_text())
    for key in ("min", "max", "mean", "median"):
        doc["benchmarks"][0]["stats"][key] /= 100.0
    saved.write_text(json.dumps(doc))
    # WHEN the same test is compared against it with a 10% median threshold
    second = pytester.runpytest_subprocess(
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-storage=store",
        "--benchmark-compare",
        "--benchmark-compare-fail=median:10%",
    )
    # THEN pytest-benchmark fails the run
    assert second.ret != 0
    assert "Performance has regressed" in second.stdout.str() + second.stderr.str()
