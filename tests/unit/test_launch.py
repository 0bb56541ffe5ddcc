"""Launch facts read once where a run starts its ranks, and handed down: the strategies that split files by rank
take the torchrun launch's global and node-local positions from the context, never from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ckptprof.loader.launch import Launch, from_environment
from ckptprof.loader.plan import ModelPlan, ShardPlan
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.strategies.prefetch import local_position
from ckptprof.loader.strategies.vllm import VllmPrefetch


def test_no_torchrun_launch_without_rank_and_world_size() -> None:
    assert from_environment({}) is None
    assert from_environment({"RANK": "3"}) is None
    assert from_environment({"WORLD_SIZE": "8"}) is None


def test_a_torchrun_launch_is_read_whole() -> None:
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    assert from_environment(env) == Launch("torchrun", rank=5, world_size=8, local_rank=1, local_world_size=4)
    # one node: torchrun may leave the local world size out, and the node holds every rank
    assert from_environment({"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "2"}) == Launch(
        "torchrun", 2, 4, 2, 4
    )


def test_the_environment_is_not_read_below_the_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    # a spawned rank in a shell that happens to carry torchrun's variables is still the spawned group's rank
    monkeypatch.setenv("RANK", "7")
    monkeypatch.setenv("WORLD_SIZE", "16")
    ctx = LoadContext(rank=1, tp=3, device=torch.device("cpu"))
    assert ctx.position == Launch("spawn", 1, 3, 1, 3)
    assert local_position(ctx) == (1, 3)


def _model(count: int) -> ModelPlan:
    shards = [
        ShardPlan(path=str(Path(f"/ckpt/model-{i:05d}.safetensors")), bytes=1, tensors={})
        for i in range(count)
    ]
    return ModelPlan(role="draft", path="/ckpt", fs_type="ext4", shards=shards)


def test_vllms_prefetch_splits_the_files_over_the_global_ranks_of_a_torchrun_launch() -> None:
    model = _model(20)
    launch = Launch("torchrun", rank=5, world_size=8, local_rank=1, local_world_size=4)
    ctx = LoadContext(rank=5, tp=8, device=torch.device("cpu"), launch=launch)
    assert [s.path for s in VllmPrefetch().share(ctx, model)] == [s.path for s in model.shards][5::8]


def test_sglangs_prefetch_takes_its_place_among_the_ranks_of_its_node() -> None:
    launch = Launch("torchrun", rank=5, world_size=8, local_rank=1, local_world_size=4)
    ctx = LoadContext(rank=5, tp=8, device=torch.device("cpu"), launch=launch)
    assert local_position(ctx) == (1, 4)
