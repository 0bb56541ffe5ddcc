"""vLLM 0.34's `--shuffle-safetensors-files`, replayed: `run --engine vllm --strategy vllm:shuffle=true` loads each
rank's files in the order vLLM gives that rank (natural order, shuffled by a generator seeded with the global rank)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.loader.plan import ModelPlan, ShardPlan
from ckptprof.loader.strategies import get_strategy, parse_spec
from ckptprof.loader.strategies.sglang_own import own_call
from ckptprof.loader.strategies.vllm import shuffled_for_rank


def _plan(names: list[str]) -> ModelPlan:
    return ModelPlan("target", "/ckpt", "ext4", [ShardPlan(f"/ckpt/{name}", 1, {}) for name in names])


NAMES = [f"model-{i:05d}-of-00012.safetensors" for i in range(1, 13)]


def test_each_rank_gets_a_permutation_of_its_own_that_does_not_depend_on_the_plans_order() -> None:
    orders = {
        rank: [Path(s.path).name for s in shuffled_for_rank(_plan(NAMES), rank).shards] for rank in range(8)
    }
    assert all(sorted(order) == NAMES for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == 8  # eight ranks, eight orders
    assert len({order[0] for order in orders.values()}) > 1  # the ranks do not all start on one file
    # The plan's own order does not matter: vLLM sorts the files before it shuffles them.
    backwards = [Path(s.path).name for s in shuffled_for_rank(_plan(NAMES[::-1]), 3).shards]
    assert backwards == orders[3]
    # And the same rank always gets the same order (a seeded generator, not the process's).
    random.seed(12345)
    assert [Path(s.path).name for s in shuffled_for_rank(_plan(NAMES), 3).shards] == orders[3]


def test_natural_order_comes_before_the_shuffle() -> None:
    """'model-2' sorts before 'model-10' (vLLM's natural key), so the shuffle of unpadded names is that of the
    natural order, not of the string order."""
    unpadded = [f"model-{i}.safetensors" for i in range(1, 12)]
    natural = _plan(sorted(unpadded, key=lambda n: int(n.split("-")[1].split(".")[0])))
    expected = list(natural.shards)
    random.Random(5).shuffle(expected)
    assert [s.path for s in shuffled_for_rank(_plan(sorted(unpadded)), 5).shards] == [
        s.path for s in expected
    ]


def test_the_flag_is_named_and_a_shuffled_path_keeps_the_replica() -> None:
    assert parse_spec("vllm:shuffle=true") == ("vllm", {"shuffle": True})
    for name in ("vllm", "vllm-eager", "vllm-prefetch", "vllm-mt"):
        assert get_strategy(name, shuffle=True).flags.endswith("--shuffle-safetensors-files")
        assert "--shuffle" not in get_strategy(name).flags
        # vLLM seeds the shuffle with torch.distributed's rank; the replay's ranks have no process group
        assert own_call(name, {"shuffle": True}) is None
    with pytest.raises(ValueError, match="shuffle"):
        get_strategy("vllm", shuffle="sometimes")


def test_a_shuffled_run_loads_each_ranks_files_in_its_own_order(tmp_path: Path) -> None:
    """GIVEN a 12-shard checkpoint WHEN `run --engine vllm --strategy vllm:shuffle=true --tp 2` THEN each rank's
    shards were loaded in the order vLLM 0.34 gives that rank, the two orders differ, and the flags say so."""
    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=12, size=6_000_000, seed=3)
    out = tmp_path / "run"
    argv = ["run", str(ckpt), "--engine", "vllm", "--strategy", "vllm:shuffle=true", "--tp", "2"]
    assert main([*argv, "--devices", "cpu", "--no-probe", "-q", "-o", str(out)]) == 0
    session = json.loads((out / "session.json").read_text())
    files = sorted(p.name for p in ckpt.glob("*.safetensors"))
    plan = ModelPlan("target", str(ckpt), "ext4", [ShardPlan(str(ckpt / name), 1, {}) for name in files])
    loaded = {}
    for rank in session["ranks"]:
        (model,) = [m for m in rank["models"] if m["role"] == "target"]
        loaded[rank["rank"]] = [shard["file"] for shard in model["shards"]]
        expected = [Path(s.path).name for s in shuffled_for_rank(plan, rank["rank"]).shards]
        assert loaded[rank["rank"]] == expected
    assert loaded[0] != loaded[1]
    assert session["config"]["strategy_flags"].endswith("--shuffle-safetensors-files")
