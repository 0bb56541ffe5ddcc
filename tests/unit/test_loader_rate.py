"""The fastsafetensors ceiling: which files are sampled, how the line is fitted, and what it predicts (the package
itself runs on a GPU only: tests/gpu and the H200 reports)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_the_fit_recovers_the_setup_and_the_rate() -> None:
    samples = [(b, 0.02 + b / 1.5e9) for b in (10_000_000, 70_000_000, 300_000_000, 900_000_000)]
    setup, rate = loader_rate.fit_setup_and_rate(samples) or (0.0, 0.0)
    assert setup == pytest.approx(0.02)
    assert rate == pytest.approx(1.5)


def test_a_negative_setup_from_noise_falls_back_to_bytes_over_seconds() -> None:
    # the small file was slow: the line through them would start below zero
    samples = [(100_000_000, 0.2), (200_000_000, 0.1)]
    assert loader_rate.fit_setup_and_rate(samples) == (0.0, pytest.approx(300_000_000 / 0.3 / GB))
    assert loader_rate.fit_setup_and_rate([]) is None
    assert loader_rate.fit_setup_and_rate([(5, 0.0)]) is None


@given(st.lists(st.tuples(st.integers(1, 10**10), st.floats(1e-6, 100.0)), min_size=1, max_size=12))
def test_the_fit_is_never_negative_or_infinite(samples: list[tuple[int, float]]) -> None:
    fit = loader_rate.fit_setup_and_rate(samples)
    assert fit is not None
    setup, rate = fit
    assert setup >= 0 and 0 < rate < float("inf")


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
    assert result["fastsafetensors_GBps"] == pytest.approx(2.0)
    assert result["fastsafetensors_setup_s"] == pytest.approx(0.01)
    assert loader_rate.predicted_seconds(result, 64, 4 * GB) == pytest.approx(64 * 0.01 + 2.0)
    assert loader_rate.predicted_seconds({}, 64, 4 * GB) is None


def test_nothing_is_measured_without_a_cuda_device() -> None:
    assert loader_rate.measure_fastsafetensors([Path("x")], ["cpu"]) == ({}, [])
    assert loader_rate.fastsafetensors_loader("cpu") is None
