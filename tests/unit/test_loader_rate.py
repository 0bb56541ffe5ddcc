"""The fastsafetensors ceiling: which files are sampled, how the line is fitted, and what it predicts (the package
itself runs on a GPU only: tests/gpu and the H200 reports)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptprof import rates
from ckptprof.probe import loader_rate

GB = 10**9


def test_the_sample_spreads_over_the_file_sizes_within_the_budget() -> None:
    files = [(Path(f"f{i}"), (i + 1) * 10_000_000) for i in range(64)]
    chosen = loader_rate.pick_sample(files, budget=1_500_000_000)
    sizes = dict(files)
    assert len(chosen) <= loader_rate.MAX_SAMPLE_FILES
    assert sum(sizes[p] for p in chosen) <= 1_500_000_000
    assert Path("f0") in chosen  # the smallest: the setup shows most there
    assert len({sizes[p] for p in chosen}) == len(chosen) >= 3  # different sizes separate setup from rate


def test_a_budget_smaller_than_every_file_still_takes_the_smallest_whole() -> None:
    chosen = loader_rate.pick_sample([(Path("big"), 900), (Path("bigger"), 1000)], budget=10)
    assert chosen == [Path("big")]
    assert loader_rate.pick_sample([(Path("empty"), 0)], budget=10) == []


def test_each_file_is_priced_from_the_sampled_points_by_its_size() -> None:
    # one thread reads a small file, sixteen a large one: time is not a line through the origin
    sample = [[10_000_000, 0.02], [100_000_000, 0.08], [400_000_000, 0.28]]
    assert rates.seconds_for(sample, 100_000_000) == pytest.approx(0.08)
    assert rates.seconds_for(sample, 55_000_000) == pytest.approx(0.05)  # halfway between two points
    assert rates.seconds_for(sample, 5_000_000) == pytest.approx(0.01)  # the smallest's rate, scaled
    # above the largest: the rate between the two largest points (300 MB in 0.2 s)
    assert rates.seconds_for(sample, 1_000_000_000) == pytest.approx(0.28 + 0.6e9 * 0.2 / 300e6)
    assert rates.seconds_for([], 10) == 0.0 and rates.seconds_for(sample, 0) == 0.0


def test_a_batch_waits_for_its_slowest_file() -> None:
    sample = [[100, 1.0], [200, 2.0]]
    assert rates.predicted_seconds(sample, [[100, 200], [100]]) == pytest.approx(2.0 + 1.0)
    assert rates.predicted_seconds(None, [[100]]) is None


@given(
    st.lists(st.tuples(st.integers(1, 10**10), st.floats(1e-6, 100.0)), min_size=1, max_size=12),
    st.integers(1, 10**11),
)
def test_a_file_is_never_priced_negative_or_infinite(sample: list[tuple[int, float]], size: int) -> None:
    seconds = rates.seconds_for(sample, size)
    assert 0 < seconds < float("inf")


def test_measure_times_each_file_after_an_untimed_warm_up() -> None:
    files = [(Path(f"f{i}"), size) for i, size in enumerate((10_000_000, 50_000_000, 200_000_000))]
    loaded: list[Path] = []
    now = [0.0]

    def load_one(path: Path) -> None:  # a loader at 2 GB/s plus 10 ms a file, on a fake clock
        loaded.append(path)
        now[0] += 0.01 + dict(files)[path] / 2e9

    result = loader_rate.measure(files, load_one, budget=GB, clock=lambda: now[0])
    assert loaded[0] == loaded[1] == Path("f0")  # the warm-up, then the timed pass
    assert result["fastsafetensors_sample_files"] == 3
    assert result["fastsafetensors_sample_bytes"] == 260_000_000
    assert result["fastsafetensors_GBps"] == pytest.approx(0.26 / 0.16, abs=1e-3)
    assert result["fastsafetensors_sample"] == [[10_000_000, 0.015], [50_000_000, 0.035], [200_000_000, 0.11]]
    assert rates.predicted_seconds(result["fastsafetensors_sample"], [[50_000_000]] * 4) == pytest.approx(
        4 * 0.035
    )


def test_nothing_is_measured_without_a_cuda_device() -> None:
    assert loader_rate.measure_fastsafetensors([Path("x")], ["cpu"]) == ({}, [])
    assert loader_rate.fastsafetensors_loader("cpu") is None
