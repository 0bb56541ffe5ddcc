"""``compare``'s deltas, gate and differences, pinned where mutation testing found them unchecked (issue #36)."""

from __future__ import annotations

import math

from ckptprof.analysis.compare import (
    Comparison,
    Delta,
    checkpoint_difference,
    compare,
    config_diffs,
    incomplete,
)
from ckptprof.results import Verdict
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming


def rank(r: int, *models: tuple[str, float], status: str = "ok") -> RankResult:
    return RankResult(
        rank=r,
        device="cpu",
        status=status,
        models=[
            RankModel(
                role=role,
                wall_s=wall,
                shards=[
                    ShardTiming(file=f"{role}.st", read_s=wall / 2, deserialize_s=wall / 4, h2d_s=wall / 8)
                ],
            )
            for role, wall in models
        ],
    )


def model(role: str, path: str = "/m", shards: tuple[tuple[str, int], ...] = (("a", 10),)) -> ModelInfo:
    return ModelInfo(
        role=role,
        path=path,
        fs_type="ext4",
        total_bytes=sum(b for _, b in shards),
        shards=[ShardInfo(f, b) for f, b in shards],
    )


def test_the_gate_fails_only_above_the_threshold() -> None:
    def gate(base: float, new: float, above: float) -> bool:
        return Comparison(wall=Delta("load wall", base, new)).regressed(above)

    assert gate(10.0, 11.0, 5.0)  # +10% > 5%
    assert not gate(10.0, 10.5, 5.0)  # exactly +5% is not above 5%
    assert gate(10.0, 10.6, 5.0)  # +6%
    assert gate(10.0, 10.54, 5.0)  # +5.4%: no slack on top of the threshold
    assert not gate(10.0, 9.0, 0.0)  # faster
    assert gate(8.0, 8.04, 0.0)  # any slowdown fails a zero threshold
    assert not gate(0.0, 5.0, 0.0)  # no BASE wall: no ratio to rule on
    assert not Comparison(wall=Delta("load wall", 10.0, None)).regressed(0.0)


def test_delta_reports_the_change_and_its_percentage() -> None:
    d = Delta("x", 4.0, 5.0)
    assert d.to_dict() == {"label": "x", "base": 4.0, "new": 5.0, "change": 1.0, "pct": 25.0}
    assert Delta("x", None, 5.0).to_dict()["change"] is None
    assert Delta("x", 0.0, 5.0).pct is None


def test_nonfinite_names_which_wall_the_gate_cannot_rule_on() -> None:
    assert Comparison(wall=Delta("load wall", 1.0, 2.0)).nonfinite() is None
    assert Comparison(wall=Delta("load wall", None, None)).nonfinite() is None
    assert Comparison(wall=Delta("load wall", math.inf, 2.0)).nonfinite() == "BASE load wall is inf"
    assert Comparison(wall=Delta("load wall", 1.0, math.nan)).nonfinite() == "NEW load wall is nan"
    # finite walls whose ratio overflows
    assert Comparison(wall=Delta("load wall", 1e-320, 1e300)).nonfinite() == "the load wall's change is inf%"


def test_compare_lines_up_models_ranks_phases_and_verdicts() -> None:
    base = Session(
        ranks=[rank(0, ("target", 4.0), ("draft", 1.0)), rank(1, ("target", 6.0))],
        verdict=Verdict(bottleneck="storage", summary="base words", load_wall_s=6.0, rank_skew=1.2),
    )
    new = Session(ranks=[rank(0, ("target", 2.0)), rank(2, ("target", 3.0), ("eagle", 1.0))])
    c = compare(base, new)
    assert c.wall.to_dict() == {
        "label": "load wall",
        "base": 6.0,
        "new": 4.0,
        "change": -2.0,
        "pct": -100 / 3,
    }
    # roles in first-seen order across both sessions; a model one session lacks has no figure there
    assert [(d.label, d.base, d.new) for d in c.models] == [
        ("target", 6.0, 3.0),
        ("draft", 1.0, None),
        ("eagle", None, 1.0),
    ]
    assert [(d.label, d.base, d.new) for d in c.ranks] == [
        ("rank 0", 5.0, 2.0),
        ("rank 1", 6.0, None),
        ("rank 2", None, 4.0),
    ]
    # phases summed over every rank and model: read is half of each wall, deserialize a quarter, h2d an eighth
    assert [(d.label, d.base, d.new) for d in c.phases] == [
        ("read", 5.5, 3.0),
        ("deserialize", 2.75, 1.5),
        ("h2d", 1.375, 0.75),
        ("other", 1.375, 0.75),
    ]
    assert c.summaries == ("base words", "")
    verdicts = {label: (b, n) for label, b, n in c.verdicts}
    assert verdicts["bottleneck"] == ("storage", None)
    assert verdicts["load wall s"] == (6.0, None)
    assert verdicts["rank skew x"] == (1.2, None)
    assert [label for label, _, _ in c.verdicts] == [
        "bottleneck",
        "achieved GB/s",
        "load wall s",
        "floor s (from ceilings)",
        "read amplification x",
        "storage amplification x",
        "major faults / GB",
        "rank skew x",
        "cold fraction",
    ]
    d = c.to_dict()
    assert d["summaries"] == {"base": "base words", "new": ""}
    assert d["models"][1] == {"label": "draft", "base": 1.0, "new": None, "change": None, "pct": None}
    assert d["verdicts"][0] == {"label": "bottleneck", "base": "storage", "new": None}
    assert d["phases"][0]["label"] == "read" and d["ranks"][2]["label"] == "rank 2"
    assert d["checkpoint_diff"] is None and d["config_diffs"] == []
    # AND the roles the sessions list come first, in their order, before those only their ranks name
    listed = Session(
        models=[model("target"), model("draft")], ranks=[rank(0, ("draft", 1.0), ("target", 2.0))]
    )
    assert [d.label for d in compare(listed, listed).models] == ["target", "draft"]
    # AND the new side's verdict is read the same way
    swapped = compare(new, base)
    assert swapped.summaries == ("", "base words")
    assert swapped.verdicts[0] == ("bottleneck", None, "storage")


def test_config_and_host_differences_are_listed() -> None:
    base = Session(config={"tp": 2, "strategy": "sglang", "seed": 1}, environment={"host": "a"})
    new = Session(config={"tp": 4, "strategy": "sglang", "seed": 2}, environment={"host": "b"})
    assert config_diffs(base, new) == [("tp", 2, 4), ("host", "a", "b")]  # seed is not a measured setting
    assert compare(base, new).to_dict()["config_diffs"] == [
        {"key": "tp", "base": 2, "new": 4},
        {"key": "host", "base": "a", "new": "b"},
    ]
    assert config_diffs(base, Session(config=dict(base.config), environment={"host": "a"})) == []


def test_checkpoint_difference_says_what_differs() -> None:
    def s(*models: ModelInfo) -> Session:
        return Session(models=list(models))

    assert checkpoint_difference(s(), s()) is None
    assert checkpoint_difference(s(model("target")), s(model("target"))) is None
    assert checkpoint_difference(s(model("target")), s()) == "models differ: BASE loads ['target'], NEW none"
    assert checkpoint_difference(s(), s(model("draft"))) == "models differ: BASE loads none, NEW ['draft']"
    assert (
        checkpoint_difference(s(model("target", "/a")), s(model("target", "/b")))
        == "target path differs: BASE /a, NEW /b"
    )
    assert (
        checkpoint_difference(
            s(model("target", shards=(("a", 10),))), s(model("target", shards=(("a", 12),)))
        )
        == "target total bytes differ: BASE 10, NEW 12"
    )
    base = s(model("target", shards=(("a", 5), ("b", 5), ("c", 5))))
    new = s(model("target", shards=(("a", 5), ("d", 5), ("e", 3), ("f", 2))))
    assert checkpoint_difference(base, new) == (
        "target shards differ: 3 vs 4 files; BASE only b (5 bytes) and 1 more; NEW only d (5 bytes) and 2 more"
    )
    one_each = s(model("target", shards=(("a", 5), ("z", 5))))
    assert checkpoint_difference(s(model("target", shards=(("a", 5), ("b", 5)))), one_each) == (
        "target shards differ: 2 vs 2 files; BASE only b (5 bytes); NEW only z (5 bytes)"
    )
    # the order the shards were listed in does not matter
    assert checkpoint_difference(s(model("target", shards=(("b", 5), ("a", 5)))), base) is not None
    assert (
        checkpoint_difference(
            s(model("target", shards=(("b", 5), ("a", 5)))), s(model("target", shards=(("a", 5), ("b", 5))))
        )
        is None
    )


def test_incomplete_names_the_first_problem() -> None:
    assert incomplete(Session()) == "no ranks"
    assert incomplete(Session(ranks=[rank(0, ("target", 1.0))])) is None
    failed = Session(ranks=[rank(0, ("target", 1.0)), rank(1, status="failed"), rank(2, status="oom")])
    assert incomplete(failed) == "rank(s) [1, 2] did not load"
    shard = Session(ranks=[rank(0, ("target", 1.0)), rank(1, ("draft", 1.0))])
    shard.ranks[1].models[0].shards.append(ShardTiming(file="x.st", status="failed"))
    shard.ranks[1].models[0].shards.append(ShardTiming(file="y.st", status="failed"))
    assert incomplete(shard) == "rank 1's draft shard x.st did not load (status failed)"
