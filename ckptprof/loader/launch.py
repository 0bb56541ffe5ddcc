"""Launch facts: which rank this process is, of how many, on this node and overall, and who started it.

They are read from the environment once, here, where a run decides how its ranks start (``from_environment``:
a torchrun / torch.distributed launch sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), and handed down as a
``Launch`` in each rank's ``LoadContext``; nothing below reads them from the environment again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Launch:
    """This rank's place: global rank and world size, and its place among the ranks on this node."""

    launcher: Literal["spawn", "torchrun"]
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @classmethod
    def spawned(cls, rank: int, world_size: int) -> Launch:
        """A rank ckptprof started itself: every rank of the group runs on this node."""
        world = max(1, world_size)
        return cls("spawn", rank, world, rank, world)

    @property
    def torchrun(self) -> bool:
        return self.launcher == "torchrun"

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def from_environment(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The torchrun launch this process is a rank of (None: not launched by torchrun)."""
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    world = int(env["WORLD_SIZE"])
    return Launch(
        "torchrun",
        rank=int(env["RANK"]),
        world_size=world,
        local_rank=int(env.get("LOCAL_RANK", "0")),
        local_world_size=max(1, int(env.get("LOCAL_WORLD_SIZE", str(world)))),
    )
