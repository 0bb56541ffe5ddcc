"""The page cache put in the state a run asked for (cold, warm, as-is) before each pass, once per node, and each
model's description as the session keeps it (its files, and what the cache held before the load)."""

from __future__ import annotations

from ckptprof.checkpoint import fs
from ckptprof.loader import torchrun
from ckptprof.loader.plan import ModelPlan, ReplayPlan
from ckptprof.session import ModelInfo, ShardInfo

CacheState = tuple[int | None, str]
"""(bytes of the model resident in the page cache, or None where another rank prepared it; what was done)."""


def prepare_cache(model: ModelPlan, mode: str) -> tuple[int, str]:
    """Put the model's files in the asked-for cache state; returns (resident bytes now, what was done)."""
    files = model.files
    if mode == "cold":
        result = fs.drop_cache(files)
        note = result.note if result.ok else f"could not fully drop the page cache: {result.note}"
        return result.resident_bytes_after, note
    if mode == "warm":
        fs.warm_cache(files)
        resident = fs.total_resident_bytes(files)
        return (
            resident,
            f"warmed: read every byte once ({100 * resident / max(1, model.total_bytes):.0f}% resident)",
        )
    resident = fs.total_resident_bytes(files)
    return (
        resident,
        f"as-is: {100 * resident / max(1, model.total_bytes):.0f}% of the files were in the page cache",
    )


def prepare_all(plan: ReplayPlan, group: torchrun.TorchrunGroup | None) -> list[CacheState]:
    """Cache prep happens once per node (the page cache is per node), then everyone waits for it."""
    if group is None or group.is_node_leader:
        states: list[CacheState] = [prepare_cache(m, plan.cache) for m in plan.models]
    else:
        states = [(None, "prepared by the node's local rank 0") for _ in plan.models]
    if group is not None:
        group.barrier()
    return states


def model_info(model: ModelPlan, resident: int | None, note: str) -> ModelInfo:
    """The session's record of one planned model: its files, and the cache state its load started from."""
    return ModelInfo(
        role=model.role,
        path=model.path,
        fs_type=model.fs_type,
        total_bytes=model.total_bytes,
        shards=[ShardInfo(file=s.name, bytes=s.bytes, tensors=len(s.tensors or {})) for s in model.shards],
        resident_bytes_before=resident,
        cache_note=note,
    )
