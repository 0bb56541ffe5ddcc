"""The process group a strategy's ranks coordinate through (fastsafetensors' hand-over, InstantTensor's shared
reads): a launcher's group under torchrun, else one made for the replay's spawned ranks and torn down after."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from contextlib import suppress
from typing import Any

from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.strategies.base import LoadContext, StrategyUnavailable

GROUP_TIMEOUT_S = 120


def make_group(
    ctx: LoadContext, plan: ReplayPlan, tag: str, nccl_only: bool, host_only: bool = False
) -> tuple[Any, str | None]:
    """The process group a TP load coordinates through, and the store file to remove afterwards (None under a
    launcher's group). NCCL needs one GPU per rank; ranks sharing a GPU (or CPU ranks) use gloo, or get no group
    (None) when ``nccl_only``: each then loads alone. ``host_only``: gloo whatever the devices (barriers between
    processes that exchange bytes through host memory, not through the devices)."""
    import torch.distributed as dist

    if not dist.is_available():
        raise StrategyUnavailable(
            "a TP load through a process group needs torch.distributed, which this torch lacks"
        )
    nccl = ctx.device.type == "cuda" and plan.tp <= len(plan.devices) and not host_only
    if nccl_only and not nccl:
        return None, None
    backend = "nccl" if nccl else "gloo"
    if dist.is_initialized():  # a torchrun launch: its world group is gloo (ckptprof's own gather)
        return (dist.new_group(backend=backend) if nccl else dist.group.WORLD), None
    # Spawned ranks share no address: they meet in a store file named by the plan's run id and the pass.
    store_path = os.path.join(
        tempfile.gettempdir(), f"ckptprof-{tag}-{plan.run_id}-{'d' if ctx.decompose else 'f'}"
    )
    store = dist.FileStore(store_path, ctx.tp)
    dist.init_process_group(
        backend,
        store=store,
        rank=ctx.rank,
        world_size=ctx.tp,
        timeout=dt.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    return dist.group.WORLD, store_path


def close_group(store_path: str | None) -> None:
    """Tear down a group ``make_group`` created for spawned ranks (a launcher's group stays up)."""
    import torch.distributed as dist

    if store_path is None:
        return
    if dist.is_initialized():
        dist.destroy_process_group()
    with suppress(OSError):
        os.unlink(store_path)
