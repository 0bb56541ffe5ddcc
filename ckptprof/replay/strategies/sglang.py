"""SGLang's default path: ``safe_open`` each shard (mmap), ``get_tensor`` every key, narrow, ``copy_``.

This is ``DefaultModelLoader`` with ``safetensors_weights_iterator`` on one thread, what a server runs without
``--weight-loader-disable-mmap``, multithread loading or prefetching.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

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
                with rec.shard(os.path.basename(shard.path), nonresident_bytes=nonresident):
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
        if not ctx.decompose and not rec.times_phases:
            self._load_shard_wall_only(ctx, role, path, rec)
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

    def _load_shard_wall_only(self, ctx: LoadContext, role: str, path: str, rec: Recorder) -> None:
        """The faithful pass's loop: SGLang's steps and nothing between them.

        The wall-only recorder times no phase, so the per-tensor phase blocks would only add their own cost to the
        wall they are meant to leave alone (tens of microseconds a shard once the copies have flushed the CPU
        caches: a tenth of a 256 MB warm load). The bytes and tensors they would have counted are counted here
        and handed over once, even when a tensor fails part-way.
        """
        nbytes = h2d_bytes = tensors = 0
        try:
            with safe_open(path, framework="pt", device="cpu") as handle:
                for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                    full = handle.get_tensor(name)
                    src = ctx.narrow(role, name, full)
                    if src is not None:
                        nbytes += full.numel() * full.element_size()
                        h2d_bytes += src.numel() * src.element_size()
                        ctx.copy(role, name, src)
                    tensors += 1
        finally:
            rec.add_counts(nbytes, h2d_bytes, tensors)
