"""SGLang with ``--weight-loader-disable-mmap``: read each file whole, deserialise it from memory, then copy.

The loader does ``safetensors.torch.load(open(f, "rb").read())`` and iterates the keys in sorted order. The whole
file lands under "read" (one sequential read: no page faults on a mapping), building the tensors from the bytes
(a memcpy per tensor) under "deserialize", and the rank's slices under "h2d".
"""

from __future__ import annotations

from pathlib import Path

import safetensors.torch

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan, ShardPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, Strategy, copy_slice, nonresident


class SGLangNoMmap(Strategy):
    name = "no-mmap"
    flags = sglang_flags.DISABLE_MMAP

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        for shard in model.shards:
            try:
                with rec.shard(Path(shard.path).name, nonresident_bytes=nonresident(shard.path, shard.bytes)):
                    if shard.error is not None:
                        raise UnreadableShard(shard.error)
                    self._load_shard(ctx, model.role, shard, rec)
            except Exception:
                continue  # recorded as failed by rec.shard; the other shards are still measured

    def _load_shard(self, ctx: LoadContext, role: str, shard: ShardPlan, rec: Recorder) -> None:
        with rec.read(shard.bytes), open(shard.path, "rb") as fh:
            data = fh.read()
        with rec.deserialize():
            tensors = safetensors.torch.load(data)
        del data  # the tensors own copies of their bytes: free the file image before copying
        for name in sorted(tensors):
            full = tensors.pop(name)
            copy_slice(ctx, role, name, full, rec)
            del full
