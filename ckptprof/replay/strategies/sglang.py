"""SGLang's default path: ``safe_open`` each shard (mmap), ``get_tensor`` every key, narrow, ``copy_``.

This is ``DefaultModelLoader`` with ``safetensors_weights_iterator`` on one thread, what a server runs without
``--weight-loader-disable-mmap``, multithread loading or prefetching.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from safetensors import safe_open

from ckptprof.checkpoint import fs, pickled
from ckptprof.replay.plan import ModelPlan
from ckptprof.replay.recorder import Recorder
from ckptprof.replay.strategies.base import LoadContext, replay_tensor
from ckptprof.replay.touch import read_header_region


class SGLangMmap:
    name = "sglang"
    flags = "(default: no flags)"

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        for shard in model.shards:
            try:
                nonresident = shard.bytes - fs.resident_bytes(shard.path)
            except OSError:
                nonresident = 0
            try:
                with rec.shard(Path(shard.path).name, nonresident_bytes=nonresident):
                    if shard.error is not None:
                        raise ValueError(shard.error)
                    self._load_shard(ctx, model.role, shard.path, rec)
            except Exception:
                continue

    def _load_pickle_shard(self, ctx: LoadContext, role: str, path: str, rec: Recorder) -> None:
        """SGLang's ``pt_weights_iterator`` (``torch.load`` then every item), restricted to weights_only."""
        with rec.deserialize():
            state = pickled.load_state_dict(path)
        for name, full in state.items():
            replay_tensor(ctx, role, name, full, rec)

    def _load_shard(self, ctx: LoadContext, role: str, path: str, rec: Recorder) -> None:
        if pickled.is_pickle(path):
            self._load_pickle_shard(ctx, role, path, rec)
            return
        with ExitStack() as stack:
            if ctx.decompose:
                with rec.read(0):
                    read_header_region(path)
            with rec.deserialize():
                handle = stack.enter_context(safe_open(path, framework="pt", device="cpu"))
                keys = list(handle.keys())
            for name in keys:
                with rec.deserialize():
                    full = handle.get_tensor(name)
                replay_tensor(ctx, role, name, full, rec)
                del full
