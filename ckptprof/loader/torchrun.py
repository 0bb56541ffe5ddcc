"""Joining a torchrun / torch.distributed launch: this process is one rank; results are gathered to rank 0 over a
gloo group. Several nodes are torchrun's job, never a home-made launcher."""

from __future__ import annotations

import atexit
from dataclasses import asdict
from typing import Any

from ckptprof.loader.launch import Launch, from_environment
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.progress import ProgressFn
from ckptprof.session import RankResult, ShardTiming, rank_from_dict


def in_torchrun() -> bool:
    return from_environment() is not None


class TorchrunGroup:
    """This process is one rank of a torchrun launch: RANK, WORLD_SIZE, LOCAL_RANK come from the environment."""

    def __init__(self) -> None:
        import torch.distributed as dist

        launch = from_environment()
        if launch is None:
            raise RuntimeError("not a torchrun launch: RANK and WORLD_SIZE are not set")
        self.dist = dist
        self.launch: Launch = launch
        self.rank = launch.rank
        self.world_size = launch.world_size
        self.local_rank = launch.local_rank
        self.local_world_size = launch.local_world_size
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")
            atexit.register(self.close)  # one group for every replay of this process, gone with it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_node_leader(self) -> bool:
        return self.local_rank == 0

    def barrier(self) -> None:
        self.dist.barrier()

    def gather(self, obj: Any) -> list[Any] | None:
        out: list[Any] | None = [None] * self.world_size if self.is_main else None
        self.dist.gather_object(obj, out, dst=0)
        return out

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def run_joined(
    group: TorchrunGroup, plan: ReplayPlan, faithful: bool = False, progress: ProgressFn | None = None
) -> list[RankResult] | None:
    """Replay this process's rank, then gather everyone's results to rank 0 (others get None)."""
    from ckptprof.loader.worker import replay_rank

    def shard_done(role: str, timing: ShardTiming) -> None:
        if progress is not None:
            progress(group.rank, role, timing)

    result = replay_rank(
        plan,
        group.rank,
        faithful=faithful,
        wait_for_all=group.barrier,
        on_shard_done=shard_done,
        launch=group.launch,
    )
    gathered = group.gather(asdict(result))
    if gathered is None:
        return None
    return [rank_from_dict(d) for d in gathered]
