"""safetensors' own ``pread`` backend (safetensors 0.8+: ``safe_open(..., backend="pread")``): a peer, not an SGLang path.

Each shard is opened with the pread backend, so ``get_tensor`` reads the tensor's bytes with ``pread(2)`` into
memory it owns instead of handing out a view of a memory-mapped file: the disk (or page-cache) read happens
inside ``get_tensor``, in large reads, not as 4 KiB page faults inside the copy. Then, as SGLang's weight loader
does, the tensor is narrowed to the rank's slice and copied into the parameter.

Recorded per rank: reading the header (decomposed pass) as "read", opening the shard as "deserialize", each ``get_tensor`` (the pread) as "read", the
narrow as "deserialize" and the copy as "h2d". With a safetensors that has no pread backend the strategy is
unavailable and says which version it needs.
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from pathlib import Path

from safetensors import safe_open

from ckptprof.loader.plan import ModelPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import (
    LoadContext,
    Strategy,
    StrategyUnavailable,
    copy_slice,
    nonresident,
)
from ckptprof.loader.touch import read_header_region


@functools.lru_cache(maxsize=1)
def pread_supported() -> bool:
    """Whether this safetensors' ``safe_open`` takes ``backend`` (0.8 and later). It is a compiled class without
    an inspectable signature, so it is asked: an unknown keyword is a TypeError, a missing file is not."""
    try:
        safe_open("/nonexistent-ckptprof-probe", framework="pt", backend="pread")
    except TypeError:
        return False
    except Exception:  # the missing file: the keyword itself was accepted
        return True
    return True


class SafetensorsPread(Strategy):
    name = "safetensors-pread"
    flags = 'not an SGLang flag: safetensors >= 0.8 safe_open(..., backend="pread")'

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        if not pread_supported():
            import safetensors

            raise StrategyUnavailable(
                f"safetensors {safetensors.__version__} has no pread backend (0.8 or later: pip install -U safetensors)"
            )
        for shard in model.shards:
            try:
                with rec.shard(Path(shard.path).name, nonresident_bytes=nonresident(shard.path, shard.bytes)):
                    if shard.error is not None:
                        raise UnreadableShard(shard.error)
                    self._load_shard(ctx, model.role, shard.path, rec)
            except Exception:
                continue  # recorded as the shard's failure; the other shards are still loaded

    @staticmethod
    def _load_shard(ctx: LoadContext, role: str, path: str, rec: Recorder) -> None:
        if ctx.decompose:  # a cold header's disk round-trip is storage's, not deserialisation's
            with rec.read(0):
                read_header_region(path)
        with ExitStack() as stack:
            with rec.deserialize():
                handle = stack.enter_context(safe_open(path, framework="pt", device="cpu", backend="pread"))
                keys = list(handle.keys())
            for name in keys:
                with rec.read(0):
                    full = handle.get_tensor(name)  # the pread: bytes land in memory safetensors allocates
                rec.add_counts(full.numel() * full.element_size(), 0, 0)
                copy_slice(ctx, role, name, full, rec)
                del full
