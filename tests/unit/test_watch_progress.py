"""The live view's progress estimate per model (issue 35): from the log's bar where there is one, else from the
page cache, and said to be unknown where neither can tell."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog.report import ProgressReport
from ckptprof.watch.residency import ModelTrack, ShardTrack
from ckptprof.watch.view import model_line, model_progress

MB = 10**6


def _model(role: str, shards: list[tuple[int, int, int]]) -> ModelTrack:
    """``shards``: (size, resident when watch began, resident now) each."""
    m = ModelTrack(role, f"/ckpt/{role}", "--model-path")
    for i, (size, start, now) in enumerate(shards):
        m.shards.append(ShardTrack(f"s{i}.safetensors", Path(f"/ckpt/{role}/s{i}"), size, start, now))
    return m


def _bar(desc: str, model: str | None, done: int, total: int, eta: int | None = None) -> ProgressReport:
    return ProgressReport(desc, model, done, total, rate=None, elapsed_s=None, eta_s=eta)


def test_the_log_bar_of_the_model_is_its_progress() -> None:
    # SGLang's own bars: the target's, then the draft's (named only because there is a draft)
    bars = [
        _bar("Loading safetensors checkpoint shards", "target", 64, 64),
        _bar("Loading safetensors checkpoint shards", "draft", 16, 64, eta=12),
        _bar("Capturing batches", None, 3, 40),
    ]
    target = _model("target", [(100 * MB, 0, 0)])
    draft = _model("draft", [(100 * MB, 0, 0)])
    assert model_progress(target, bars) == "load 100% by the log (64/64 shards)"
    assert model_progress(draft, bars) == "load 25% by the log (16/64 shards, 12 s left by its bar)"


def test_an_unnamed_bar_is_the_only_model_s_and_no_one_s_beside_a_draft() -> None:
    bars = [_bar("Loading safetensors checkpoint shards", None, 3, 4)]
    target = _model("target", [(100 * MB, 0, 0)])
    assert model_progress(target, bars, only_model=True).startswith("load 75% by the log (3/4 shards")
    # with a draft beside it, a bar that names no model is not taken for either
    assert "by the log" not in model_progress(target, bars, only_model=False)


def test_without_a_bar_the_page_cache_counts_only_what_was_not_cached_when_watch_began() -> None:
    # GIVEN shards of 100 MB: one cached before watch began, one half read since, one untouched
    m = _model(
        "target", [(100 * MB, 100 * MB, 100 * MB), (100 * MB, 0, 50 * MB), (100 * MB, 20 * MB, 20 * MB)]
    )
    # THEN 50 MB of the 180 MB not cached at the start have come in: 28%, a lower bound
    assert (
        model_progress(m)
        == "load >= 28% by page cache (50.00 MB of the 180.00 MB not cached when watch began)"
    )
    assert model_line(m).endswith(model_progress(m))


def test_a_load_whose_bytes_were_cached_before_watch_began_has_no_figure() -> None:
    m = _model("draft", [(100 * MB, 100 * MB, 100 * MB)])
    assert (
        model_progress(m)
        == "load progress unknown: in page cache before watch began, and the log shows no bar"
    )
    m.reliable = False
    assert "not visible to this user" in model_progress(m)
