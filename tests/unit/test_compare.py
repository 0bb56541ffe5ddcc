"""`compare`: deltas per model, rank and phase, and the --fail-above exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ckptprof import api
from ckptprof.analysis.compare import compare
from ckptprof.cli.compare_cmd import gate
from ckptprof.cli.main import main
from ckptprof.errors import CkptprofError
from ckptprof.results import Verdict
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming, dumps_strict


def run_of(walls: dict[int, dict[str, float]], read_share: float = 0.5, **config: object) -> Session:
    """Ranks -> {model: wall}; each model is one shard whose read takes ``read_share`` of its wall."""
    ranks = []
    start = 0.0
    for rank, models in walls.items():
        rank_models = []
        for role, wall in models.items():
            shard = ShardTiming(file=f"{role}.safetensors", bytes=10**9, wall_s=wall, start_s=start,
                                read_s=wall * read_share, deserialize_s=wall * 0.1, h2d_s=wall * 0.2)  # fmt: skip
            rank_models.append(RankModel(role=role, wall_s=wall, start_s=start, shards=[shard]))
        ranks.append(RankResult(rank=rank, device=f"cuda:{rank}", models=rank_models))
    return Session(
        config={"tp": len(walls), "cache": "cold", **config},
        ranks=ranks,
        verdict=Verdict.from_dict(
            {"bottleneck": "storage", "summary": "storage-bound", "achieved_GBps": 1.0}
        ),
    )


BASE = {0: {"target": 10.0, "draft": 2.0}, 1: {"target": 9.0, "draft": 2.5}}


def test_deltas_per_model_rank_and_phase() -> None:
    # GIVEN BASE and a NEW run whose rank 1 target got 2 s slower and whose reads take a larger share
    new = {0: {"target": 10.0, "draft": 2.0}, 1: {"target": 11.0, "draft": 2.5}}
    cmp = compare(run_of(BASE), run_of(new, read_share=0.6))
    # THEN the load wall is the slowest rank's summed walls: 12.0 s -> 13.5 s
    assert (cmp.wall.base, cmp.wall.new) == (12.0, 13.5)
    assert cmp.wall.pct == pytest.approx(12.5)
    # AND per model the slowest rank counts; per rank all its models
    models = {d.label: (d.base, d.new) for d in cmp.models}
    assert models == {"target": (10.0, 11.0), "draft": (2.5, 2.5)}
    ranks = {d.label: d.change for d in cmp.ranks}
    assert ranks == {"rank 0": 0.0, "rank 1": pytest.approx(2.0)}
    # AND phases are rank-seconds summed over ranks
    phases = {d.label: d for d in cmp.phases}
    assert phases["read"].base == pytest.approx(0.5 * 23.5)
    assert phases["read"].new == pytest.approx(0.6 * 25.5)
    assert [d.label for d in cmp.phases] == ["read", "deserialize", "h2d", "other"]


def test_missing_ranks_and_models_have_no_delta_and_config_changes_are_listed() -> None:
    # GIVEN BASE with 2 ranks and a draft, NEW with 1 rank, no draft, another cache mode
    cmp = compare(run_of(BASE), run_of({0: {"target": 10.0}}, cache="warm"))
    assert {d.label: d.new for d in cmp.models} == {"target": 10.0, "draft": None}
    rank1 = next(d for d in cmp.ranks if d.label == "rank 1")
    assert rank1.new is None and rank1.change is None and rank1.pct is None
    assert ("tp", 2, 1) in cmp.config_diffs and ("cache", "cold", "warm") in cmp.config_diffs


@pytest.mark.parametrize(
    ("new_target", "fail_above", "regressed"),
    [(11.0, 10.0, False), (11.02, 10.0, True), (10.98, 10.0, False), (11.1, 10.0, True), (11.1, 20.0, False),
     (8.0, 0.0, False), (10.01, 0.0, True), (10.5, -10.0, True)],
    ids=["exactly-at-limit", "a-fifth-of-a-point-above", "a-fifth-of-a-point-below", "above-limit", "within-limit",
         "faster", "a-tenth-of-a-point-above-zero", "must-improve"],
)  # fmt: skip
def test_regression_rule_is_strictly_more_than_pct(
    new_target: float, fail_above: float, regressed: bool
) -> None:
    # GIVEN a one-rank BASE of 10 s and NEW of new_target s
    cmp = compare(run_of({0: {"target": 10.0}}), run_of({0: {"target": new_target}}))
    assert cmp.regressed(fail_above) is regressed


def save(tmp_path: Path, name: str, session: Session) -> str:
    return str(session.save(tmp_path / f"{name}.json"))


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = save(tmp_path, "base", run_of({0: {"target": 10.0}}))
    slower = save(tmp_path, "slower", run_of({0: {"target": 12.0}}))
    # WHEN NEW is 20% slower THEN --fail-above 10 exits 1 with one line naming NEW and both walls
    assert main(["compare", base, slower, "--fail-above", "10"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and slower in err and "+20.0%" in err and "10.000 s" in err
    # AND the gate has no slack of its own: 10.2% slower fails --fail-above 10, 9.8% slower passes it
    barely = save(tmp_path, "barely", run_of({0: {"target": 11.02}}))
    assert main(["compare", base, barely, "--fail-above", "10"]) == 1
    assert "+10.2%" in capsys.readouterr().err
    within = save(tmp_path, "within", run_of({0: {"target": 10.98}}))
    assert main(["compare", base, within, "--fail-above", "10"]) == 0
    capsys.readouterr()
    # AND a larger allowance, or no threshold at all, exits 0
    assert main(["compare", base, slower, "--fail-above", "25%"]) == 0
    assert main(["compare", base, slower]) == 0
    # AND an unreadable session is bad input (2), as is a bad percentage
    assert main(["compare", base, str(tmp_path / "missing.json"), "--fail-above", "10"]) == 2
    assert main(["compare", base, slower, "--fail-above", "ten"]) == 2


def test_cli_fails_a_new_run_with_failed_ranks_and_refuses_a_base_without_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = save(tmp_path, "base", run_of({0: {"target": 10.0}}))
    broken = run_of({0: {"target": 1.0}})
    broken.ranks.append(RankResult(rank=1, device="cuda:1", status="failed", error="OOM"))
    # GIVEN a NEW run that is "faster" only because a rank died THEN the gate fails it
    assert main(["compare", base, save(tmp_path, "broken", broken), "--fail-above", "10"]) == 1
    assert "did not load" in capsys.readouterr().err
    # AND a BASE with no timings cannot be compared against (2)
    assert main(["compare", save(tmp_path, "empty", Session()), base, "--fail-above", "10"]) == 2
    assert "no rank timings" in capsys.readouterr().err


def test_cli_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = save(tmp_path, "base", run_of(BASE))
    new = save(
        tmp_path, "new", run_of({0: {"target": 10.0, "draft": 2.0}, 1: {"target": 11.0, "draft": 2.5}})
    )
    assert main(["compare", base, new, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["wall"]["pct"] == pytest.approx(12.5) and data["base"] == base
    assert main(["compare", base, new, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## ckptprof compare: load wall +12.5%") and "| rank 1" in md and "- **BASE:**" in md
    assert main(["compare", base, new]) == 0
    table = capsys.readouterr().out
    assert "Per phase" in table and "+12.5" in table


def test_a_real_session_compared_with_itself_has_no_change(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a real replay saved once
    path = save(tmp_path, "real", api.replay(small_draft, probe=False))
    # WHEN compared with itself under a zero allowance THEN nothing changed and the gate passes
    assert main(["compare", path, path, "--fail-above", "0", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["wall"]["pct"] == 0.0 and all(d["change"] == 0.0 for d in data["phases"])


# -- the gate fails closed: what it cannot vouch for never passes ---------------------------------------------


def with_checkpoint(
    session: Session, path: str = "/data/eagle3", shards: tuple[tuple[str, int], ...] = (("a", 6), ("b", 4))
) -> Session:
    session.models = [
        ModelInfo(
            role="target",
            path=path,
            fs_type="ext4",
            total_bytes=sum(b for _, b in shards),
            shards=[ShardInfo(f, b) for f, b in shards],
        )
    ]
    return session


def one_line(err: str) -> str:
    line = err.strip()
    assert line.count("\n") == 0 and "Traceback" not in line, err
    return line


def test_gate_refuses_a_base_whose_rank_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a BASE whose rank 1 died early (its load wall is that of the rank that finished: 0.01 s)
    base = run_of({0: {"target": 0.01}})
    base.ranks.append(RankResult(rank=1, device="cuda:1", status="failed", error="OOM"))
    base_path = save(tmp_path, "base", base)
    new_path = save(tmp_path, "new", run_of({0: {"target": 3.6}, 1: {"target": 3.6}}))
    # WHEN NEW is gated against it THEN the gate cannot rule: exit 2, one line naming BASE and why
    assert main(["compare", base_path, new_path, "--fail-above", "10"]) == 2
    err = one_line(capsys.readouterr().err)
    assert base_path in err and "rank(s) [1] did not load" in err and "BASE is not a complete run" in err


def test_gate_refuses_a_base_with_a_failed_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = run_of({0: {"target": 10.0}})
    base.ranks[0].models[0].shards[0].status = "failed"
    assert main(["compare", save(tmp_path, "b", base), save(tmp_path, "n", run_of({0: {"target": 10.0}})),
                 "--fail-above", "10"]) == 2  # fmt: skip
    assert "shard target.safetensors did not load" in one_line(capsys.readouterr().err)


def test_gate_fails_a_new_run_with_a_failed_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = run_of({0: {"target": 1.0}})
    new.ranks[0].models[0].shards[0].status = "failed"
    base = save(tmp_path, "b", run_of({0: {"target": 10.0}}))
    assert main(["compare", base, save(tmp_path, "n", new), "--fail-above", "10"]) == 1
    assert "NEW is not a complete run" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("new_path", "new_shards", "words"),
    [
        ("/data/other", (("a", 6), ("b", 4)), "target path differs: BASE /data/eagle3, NEW /data/other"),
        ("/data/eagle3", (("a", 6), ("b", 5)), "target total bytes differ: BASE 10, NEW 11"),
        (
            "/data/eagle3",
            (("a", 6), ("c", 4)),
            "target shards differ: 2 vs 2 files; BASE only b (4 bytes); NEW only c",
        ),
        ("/data/eagle3", (("a", 10),), "target shards differ: 2 vs 1 files"),
    ],
    ids=["path", "total-bytes", "shard-names", "shard-count"],
)
def test_gate_refuses_sessions_of_different_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new_path: str, new_shards: tuple[tuple[str, int], ...],
    words: str,
) -> None:  # fmt: skip
    # GIVEN BASE and NEW that loaded different checkpoints (NEW even looks faster)
    base = save(tmp_path, "base", with_checkpoint(run_of({0: {"target": 10.0}})))
    new = save(tmp_path, "new", with_checkpoint(run_of({0: {"target": 5.0}}), new_path, new_shards))
    # WHEN gated THEN exit 2 with one line that says the checkpoints differ and how
    assert main(["compare", base, new, "--fail-above", "10"]) == 2
    err = one_line(capsys.readouterr().err)
    assert "loaded different checkpoints" in err and words in err
    # AND without a gate the comparison is still shown, with a warning and the difference in its JSON
    assert main(["compare", base, new, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert words in json.loads(out)["checkpoint_diff"] and "different checkpoints" in err


def test_gate_refuses_a_session_with_a_checkpoint_against_one_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = save(tmp_path, "base", with_checkpoint(run_of({0: {"target": 10.0}})))
    new = save(tmp_path, "new", run_of({0: {"target": 10.0}}))
    assert main(["compare", base, new, "--fail-above", "10"]) == 2
    assert "models differ: BASE loads ['target'], NEW none" in one_line(capsys.readouterr().err)


def test_the_same_checkpoint_in_another_shard_order_is_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the same checkpoint discovered in another order (--order glob vs sorted)
    base = save(tmp_path, "base", with_checkpoint(run_of({0: {"target": 10.0}})))
    new = save(tmp_path, "new", with_checkpoint(run_of({0: {"target": 10.5}}), shards=(("b", 4), ("a", 6))))
    # THEN the gate rules on the walls as usual
    assert main(["compare", base, new, "--fail-above", "10"]) == 0
    assert main(["compare", base, new, "--fail-above", "1"]) == 1
    assert "+5.0%" in capsys.readouterr().err


@pytest.mark.parametrize("side", ["base", "new"])
@pytest.mark.parametrize("token", ["NaN", "Infinity"])
def test_non_finite_walls_are_refused_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str, token: str
) -> None:
    # GIVEN a session whose rank wall is NaN or infinite
    good = save(tmp_path, "good", run_of({0: {"target": 10.0}}))
    bad_path = tmp_path / "bad.json"
    text = run_of({0: {"target": 10.0}}).to_json()
    bad_path.write_text(text.replace('"wall_s": 10.0', f'"wall_s": {token}', 1))
    argv = [good, str(bad_path)] if side == "new" else [str(bad_path), good]
    # WHEN compared, gated or not THEN exit 2 with one line naming the file and the field; no "+nan%"
    for extra in (["--fail-above", "10"], [], ["--format", "json"]):
        assert main(["compare", *argv, *extra]) == 2
        out, err = capsys.readouterr()
        line = one_line(err)
        assert str(bad_path) in line and "wall_s: not a finite number" in line and "nan%" not in out


def test_gate_refuses_non_finite_figures_of_sessions_built_in_memory() -> None:
    # GIVEN sessions handed to the gate directly (an API caller), one with a NaN wall
    base, new = run_of({0: {"target": 10.0}}), run_of({0: {"target": float("nan")}})
    args = argparse.Namespace(base="base.json", new="new.json", fail_above=10.0)
    # THEN the gate fails closed with exit 2 rather than passing a NaN ("NaN > 10" is False)
    with pytest.raises(CkptprofError) as info:
        gate(compare(base, new), base, new, args)
    assert info.value.exit_code == 2 and "not a finite figure" in str(info.value)
    # AND the JSON of such a comparison is strict
    text = dumps_strict(compare(base, new).to_dict())
    assert json.loads(text, parse_constant=lambda t: pytest.fail(t))["wall"]["new"] is None


def test_gate_refuses_a_new_run_without_timings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a NEW whose ranks are ok but timed nothing (a load wall of 0 would read as -100%)
    base = save(tmp_path, "base", run_of({0: {"target": 10.0}}))
    new = save(tmp_path, "new", Session(ranks=[RankResult(rank=0, device="cpu")]))
    assert main(["compare", base, new, "--fail-above", "10"]) == 2
    assert "no rank timings" in one_line(capsys.readouterr().err)


# -- unlike runs: the gate refuses settings that move the wall unless the difference is accepted -------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"cache": "warm"}, "cache: BASE cold, NEW warm"),
        ({"devices": ["cuda:0", "cuda:1"]}, "devices: BASE cuda:0, NEW cuda:0 cuda:1"),
        ({"strategy": "sglang-mt"}, "strategy: BASE sglang, NEW sglang-mt"),
        ({"strategy_params": {"num_threads": 16}}, "strategy_params: BASE none, NEW num_threads=16"),
    ],
    ids=["cache", "devices", "strategy", "strategy-params"],
)
def test_gate_refuses_settings_that_move_the_wall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], words: str
) -> None:
    # GIVEN BASE and a NEW run that differ in one setting that moves the load wall
    settings: dict[str, object] = {"devices": ["cuda:0"], "strategy": "sglang", "strategy_params": {}}
    base_run, new_run = run_of({0: {"target": 10.0}}), run_of({0: {"target": 10.0}})
    base_run.config.update(settings)
    new_run.config.update({**settings, **change})
    base, new = save(tmp_path, "base", base_run), save(tmp_path, "new", new_run)
    # WHEN gated THEN exit 2 with one line naming the setting and both values, and the flag that accepts it
    assert main(["compare", base, new, "--fail-above", "10"]) == 2
    err = one_line(capsys.readouterr().err)
    assert words in err and "--allow-different-config" in err
    # AND accepted, the gate rules on the walls (equal here: 0), with the difference in a warning
    assert main(["compare", base, new, "--fail-above", "10", "--allow-different-config"]) == 0
    assert words in capsys.readouterr().err
    # AND the JSON names which differences make the walls unlike
    assert main(["compare", base, new, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["unlike"] == [words.split(":")[0]]


def test_settings_that_do_not_move_the_wall_and_absent_parameters_are_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an older BASE that recorded no strategy parameters, and a NEW with none, in another file order
    base = save(tmp_path, "base", run_of({0: {"target": 10.0}}, order="sorted"))
    new = save(tmp_path, "new", run_of({0: {"target": 10.5}}, order="glob", strategy_params={}))
    # THEN the gate rules on the walls as usual (the order is listed, not refused)
    assert main(["compare", base, new, "--fail-above", "1"]) == 1
    assert "+5.0%" in one_line(capsys.readouterr().err)


def test_allow_different_config_also_accepts_another_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the same model moved to another path (refused by default)
    base = save(tmp_path, "base", with_checkpoint(run_of({0: {"target": 10.0}})))
    new = save(tmp_path, "new", with_checkpoint(run_of({0: {"target": 12.0}}), "/data/moved"))
    assert main(["compare", base, new, "--fail-above", "10"]) == 2
    assert "--allow-different-config" in one_line(capsys.readouterr().err)
    # WHEN accepted THEN the walls are gated: 20% slower fails --fail-above 10, and the difference is warned about
    assert main(["compare", base, new, "--fail-above", "10", "--allow-different-config"]) == 1
    err = capsys.readouterr().err
    assert "warning: different checkpoints" in err and "+20.0%" in err
