"""`run --check-predictions`: every recommendation with a prediction and a replayable strategy is replayed with
that strategy, and its measured wall is set beside the predicted one (the integration test in test_run.py runs the
real thing, but a small cold CPU load does not always earn a prediction)."""

from __future__ import annotations

from typing import Any

import pytest

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.cli.run_cmd import check_recommendations
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
        ceilings={
            "storage_read_GBps": 1.5,
            "storage_read_1_stream_GBps": 1.4,
            "storage_read_n_streams_GBps": 2.0,
            "storage_streams": 4,
            "page_cache_read_GBps": 7.0,
            "fresh_write_GBps": 3.0,
        },
    )
    session.verdict = compute_verdict(session)
    return session


def test_every_predicted_flag_set_is_replayed_with_its_strategy_and_measured() -> None:
    session = storage_bound(3.0)
    replayable = [p for p in session.verdict["predictions"] if p["predicted_s"] is not None and p["strategy"]]
    assert replayable  # a cold, storage-bound load earns predictions
    calls: list[dict[str, Any]] = []

    def replay_one(**kwargs: Any) -> Session:
        calls.append(kwargs)
        return storage_bound(2.0, strategy=kwargs["strategy"])

    check_recommendations(session, replay_one, lambda _msg: None)
    checks = session.extra["prediction_check"]
    assert [c["strategy"] for c in checks] == [p["strategy"] for p in replayable]
    assert [c["strategy"] for c in calls] == [p["strategy"].split(":")[0] for p in replayable]
    for check in checks:
        assert check["status"] == "ok" and check["measured_s"] == pytest.approx(2.0)
        assert check["error"] == pytest.approx(check["predicted_s"] / 2.0 - 1, abs=1e-3)
        assert check["within_tolerance"] == (abs(check["error"]) <= 0.2)


def test_a_recommendation_without_a_prediction_or_a_strategy_is_not_replayed() -> None:
    session = storage_bound(3.0)
    session.verdict["predictions"] = [
        {"flags": "--a", "strategy": None, "predicted_s": 1.0, "why": ""},
        {"flags": "--b", "strategy": "prefetch", "predicted_s": None, "why": ""},
    ]
    check_recommendations(session, lambda **_k: pytest.fail("nothing should be replayed"), lambda _m: None)
    assert session.extra["prediction_check"] == []
