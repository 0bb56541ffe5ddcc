"""ReplayOptions: one dataclass for how a replay runs, taken by build_plan and api.replay, with keywords on top."""

from __future__ import annotations

from pathlib import Path

import pytest

import ckptprof
from ckptprof.loader.options import ReplayOptions, resolve
from ckptprof.loader.plan import build_plan


def test_keywords_override_the_options_and_unknown_names_are_refused() -> None:
    base = ReplayOptions(tp=2, cache="cold", strategy_params={"num_threads": 4})
    o = resolve(base, {"tp": 8, "devices": ["cuda:0", "cuda:1"], "draft_strategy": None})
    assert (o.tp, o.cache, o.devices, o.strategy_params) == (
        8,
        "cold",
        ("cuda:0", "cuda:1"),
        {"num_threads": 4},
    )
    assert base.tp == 2  # frozen: the caller's options are never changed
    with pytest.raises(TypeError, match=r"unknown replay option.*: tp_size"):
        resolve(None, {"tp_size": 8})


def test_the_rank_timeout_comes_from_the_option_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CKPTPROF_RANK_TIMEOUT_S", raising=False)
    assert ReplayOptions().hang_timeout_s() is None
    monkeypatch.setenv("CKPTPROF_RANK_TIMEOUT_S", "30")
    assert ReplayOptions().hang_timeout_s() == 30.0
    assert ReplayOptions(rank_timeout_s=5).hang_timeout_s() == 5.0
    assert ReplayOptions(rank_timeout_s=0).hang_timeout_s() is None  # 0: never


def test_build_plan_takes_options_or_the_same_names_as_keywords(small_draft: Path) -> None:
    by_options = build_plan(small_draft, None, ReplayOptions(tp=2, strategy="sglang-mt", rank_timeout_s=7))
    by_keywords = build_plan(small_draft, tp=2, strategy="sglang-mt", rank_timeout_s=7)
    for plan in (by_options, by_keywords):
        assert (plan.tp, plan.strategy, plan.rank_timeout_s) == (2, "sglang-mt", 7.0)
    assert by_options.config() == by_keywords.config()


def test_the_documented_api_line_takes_options(small_draft: Path) -> None:
    session = ckptprof.replay(
        str(small_draft), options=ckptprof.ReplayOptions(tp=2, probe=False), cache="as-is"
    )
    assert session.config["tp"] == 2 and session.config["cache"] == "as-is"
    assert all(r.status == "ok" for r in session.ranks)


def test_several_strategies_are_replayed_in_turn_against_one_probe(small_draft: Path) -> None:
    from ckptprof import api

    kept: list[dict[str, object]] = []
    runs = api.replay_strategies(
        small_draft,
        None,
        [("sglang", {}), ("sglang-mt", {"num_threads": 2})],
        ReplayOptions(tp=2, cache="as-is", probe_sample_bytes=4_000_000),
        on_ceilings=kept.append,
    )
    assert [s.config["strategy"] for s in runs.sessions] == ["sglang", "sglang-mt"]
    assert not runs.interrupted and len(kept) == 1
    # the first replay measured the ceilings; the second was held against the same ones, not a probe of its own
    assert runs.ceilings is kept[0] is runs.sessions[0].ceilings
    assert runs.sessions[1].ceilings == runs.sessions[0].ceilings
    assert runs.sessions[1].config["strategy_params"] == {"num_threads": 2}
    # and side by side, in the result and in the first session
    assert runs.comparison is not None
    assert [row.strategy for row in runs.comparison.rows] == ["sglang", "sglang-mt"]
    assert runs.sessions[0].strategies is runs.comparison
    assert runs.sessions[0].to_dict()["extra"]["strategies"] == runs.comparison.to_dict()
    # without a probe nothing is measured or kept
    bare = api.replay_strategies(small_draft, None, [("sglang", {})], probe=False, on_ceilings=kept.append)
    assert bare.ceilings is None and len(kept) == 1
    assert bare.comparison is None and "strategies" not in bare.sessions[0].extra
