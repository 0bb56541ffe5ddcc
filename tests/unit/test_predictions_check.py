"""`run --check-predictions`: every recommendation with a prediction and a replayable strategy is replayed with
that strategy, and its measured wall is set beside the predicted one (the integration test in test_run.py runs the
real thing, but a small cold CPU load does not always earn a prediction)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.results import Ceilings, Prediction
from ckptprof.run.predictions import check_recommendations
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def storage_bound(wall: float, strategy: str = "sglang-mt") -> Session:
    shard = ShardTiming(
        file="s",
        bytes=4 * GB,
        read_s=wall * 0.9,
        h2d_s=wall * 0.05,
        wall_s=wall,
        h2d_bytes=4 * GB,
        nonresident_bytes=4 * GB,
    )
    session = Session(
        config={"tp": 1, "devices": ["cpu"], "strategy": strategy, "cache": "cold"},
        models=[
            ModelInfo(
                role="target",
                path="/c",
                fs_type="ext4",
                total_bytes=4 * GB,
                shards=[ShardInfo("s", 4 * GB)],
                resident_bytes_before=0,
            )
        ],
        ranks=[
            RankResult(rank=0, device="cpu", models=[RankModel(role="target", wall_s=wall, shards=[shard])])
        ],
        ceilings=Ceilings.from_dict(
            {
                "storage_read_GBps": 1.5,
                "storage_read_1_stream_GBps": 1.4,
                "storage_read_n_streams_GBps": 2.0,
                "storage_streams": 4,
                "page_cache_read_GBps": 7.0,
                "fresh_write_GBps": 3.0,
            }
        ),
    )
    session.verdict = compute_verdict(session)
    return session


def test_every_predicted_flag_set_is_replayed_with_its_strategy_and_measured() -> None:
    session = storage_bound(3.0)
    replayable = [p for p in session.verdict.predictions if p.predicted_s is not None and p.strategy]
    assert replayable  # a cold, storage-bound load earns predictions
    calls: list[dict[str, Any]] = []

    def replay_one(**kwargs: Any) -> Session:
        calls.append(kwargs)
        return storage_bound(2.0, strategy=kwargs["strategy"])

    check_recommendations(session, replay_one, lambda _msg: None)
    checks = session.extra["prediction_check"]
    assert [c["strategy"] for c in checks] == [p.strategy for p in replayable]
    assert [c["strategy"] for c in calls] == [p.strategy.split(":")[0] for p in replayable]
    for check in checks:
        assert check["status"] == "ok" and check["measured_s"] == pytest.approx(2.0)
        assert check["error"] == pytest.approx(check["predicted_s"] / 2.0 - 1, abs=1e-3)
        assert check["within_tolerance"] == (abs(check["error"]) <= 0.2)


def test_a_recommendation_without_a_prediction_or_a_strategy_is_not_replayed() -> None:
    session = storage_bound(3.0)
    assert session.verdict is not None
    session.verdict = replace(
        session.verdict,
        predictions=(
            Prediction(flags="--a", strategy=None, predicted_s=1.0, why=""),
            Prediction(flags="--b", strategy="prefetch", predicted_s=None, why=""),
        ),
    )
    check_recommendations(session, lambda **_k: pytest.fail("nothing should be replayed"), lambda _m: None)
    assert session.extra["prediction_check"] == []


def test_nothing_to_check_says_why_for_each_way_a_check_can_find_nothing() -> None:
    from ckptprof.run.predictions import nothing_to_check

    session = storage_bound(3.0)
    assert session.verdict is not None and nothing_to_check(session) is None  # a priced, replayable flag
    priced_elsewhere = Prediction(flags="--a", strategy=None, predicted_s=1.0, why="")
    unpriced = Prediction(flags="--b", strategy="prefetch", predicted_s=None, why="")
    session.verdict = replace(session.verdict, predictions=(priced_elsewhere, unpriced))
    assert nothing_to_check(session) == "no flag the verdict prices has a path ckptprof can replay"
    session.verdict = replace(session.verdict, predictions=(unpriced,))
    assert nothing_to_check(session) == "the verdict recommends no flag with a predicted wall for this load"
    session.verdict = replace(session.verdict, predictions=())
    session.ceilings = Ceilings()
    assert (
        nothing_to_check(session) == "no ceilings were measured (--no-probe), so the verdict priced no flag"
    )


def test_each_check_is_also_repriced_with_the_storage_measured_just_before_its_replay() -> None:
    # GIVEN a storage that lost half its rate between the probe and the replay (a cloud volume out of burst
    # credits: the H200 x2 box went from 2.31 to 1.62 GB/s within four minutes)
    from ckptprof.analysis.predictions import check_predictions, repriced
    from ckptprof.render import markdown, rows

    session = storage_bound(3.0)
    (prefetch,) = [p for p in session.verdict.predictions if p.strategy == "prefetch"]
    then = {"storage_read_n_streams_GBps": 1.0, "storage_read_1_stream_GBps": 0.7, "storage_read_GBps": 1.0}
    # WHEN the check holds the replay against the prediction and against the prediction made again from then
    (row,) = check_predictions(session, [(prefetch, storage_bound(4.0, "prefetch"))], [then])
    # THEN the first prediction is kept and judged as it was; the re-priced one is the model on the storage then
    assert row["predicted_s"] == prefetch.predicted_s == pytest.approx(2.0)  # 4 GB at 2 GB/s
    assert row["error"] == pytest.approx(-0.5) and row["within_tolerance"] is False
    assert row["repriced_s"] == pytest.approx(4.0) == repriced(session, then, prefetch.flags)
    assert row["repriced_error"] == pytest.approx(0.0) and row["repriced_within_tolerance"] is True
    assert row["storage_GBps_then"] == 1.0
    session.extra["prediction_check"] = [row]
    assert rows.prediction_rows(session)[0][-1] == "4.00 s, +0%, yes (storage 1.00 GB/s)"
    assert "| re-priced with the storage then " in markdown.render(session)
    # a check without a re-measure keeps the five columns
    (plain,) = check_predictions(session, [(prefetch, storage_bound(4.0, "prefetch"))])
    assert plain["repriced_s"] is None
    session.extra["prediction_check"] = [plain]
    assert len(rows.prediction_rows(session)[0]) == len(rows.PREDICTION_HEADERS)


def test_the_storage_is_measured_again_on_the_checkpoints_own_files(tmp_path: Any) -> None:
    from pathlib import Path

    from ckptprof.checkpoint.synth import synthesize
    from ckptprof.run.predictions import storage_now

    ckpt = Path(tmp_path) / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=4, size=8_000_000, seed=3)
    session = storage_bound(3.0)
    session.models[0].path = str(ckpt)
    now = storage_now(session, fastsafetensors=True)  # no CUDA device here: storage alone
    assert now["storage_read_n_streams_GBps"] > 0 and now["storage_read_1_stream_GBps"] > 0
    assert not any(key.startswith(("page_cache", "fastsafetensors")) for key in now)
    # a run without a probe has nothing to hold a drift against
    session.ceilings = Ceilings()
    assert storage_now(session, fastsafetensors=False) == {}
