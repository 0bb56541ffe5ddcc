"""SGLang's ``--load-format fastsafetensors``, driven through the real ``fastsafetensors`` package.

The files are taken in batches of one file per rank; in each batch every rank reads its own file straight into
device memory (GPUDirect Storage, or parallel preads into pinned bounce buffers), then every tensor of the batch
is handed to every rank (a broadcast from the rank that read it), narrowed and copied into the parameter.

Recorded per rank: the batch read (``copy_files_to_device``: storage read *and* fastsafetensors' own transfer to
the device) as "read" on the rank's own file; each tensor's hand-over (the broadcast) as "deserialize" and its
narrow + copy into the parameter as "h2d", on the shard the tensor lives in.

When the package is not installed the strategy is unavailable and says so; it is never imitated. A TP group of
more than one rank needs a process group: under torchrun the launch's, otherwise one made for the replay in
``prepare`` (before the timed load, as SGLang initialises torch.distributed before loading).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan, ReplayPlan, ShardPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import (
    LoadContext,
    Strategy,
    StrategyUnavailable,
    nonresident,
    optional_package,
)
from ckptprof.loader.strategies.groups import close_group, make_group
from ckptprof.session import ShardTiming

INSTALL_HINT = "fastsafetensors is not installed (pip install fastsafetensors)"


def load_package() -> ModuleType | None:
    return optional_package("fastsafetensors")


class FastSafetensors(Strategy):
    name = "fastsafetensors"
    flags = sglang_flags.load_format("fastsafetensors")

    def __init__(
        self, nogds: bool | None = None, max_threads: int = 16, bbuf_size_kb: int = 16 * 1024
    ) -> None:
        self.nogds = (
            nogds  # None: GDS on CUDA where fastsafetensors finds it (it falls back by itself), never on CPU
        )
        self.max_threads = max_threads
        self.bbuf_size_kb = bbuf_size_kb
        self._group: Any = None
        self._store_path: str | None = None

    # -- process group ----------------------------------------------------------------------------------------
    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        if ctx.tp > 1 and load_package() is not None:
            self._group, self._store_path = make_group(ctx, plan, "fst", nccl_only=False)

    def close(self) -> None:
        close_group(self._store_path)
        self._store_path = None
        self._group = None

    # -- the load ---------------------------------------------------------------------------------------------
    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        fst = load_package()
        if fst is None:
            raise StrategyUnavailable(INSTALL_HINT)
        if ctx.tp > 1 and self._group is None:
            self._group = self._make_group_late(ctx)
        pg = self._group if self._group is not None else fst.SingleGroup()
        size, rank = pg.size(), pg.rank()
        readable = []
        for shard in model.shards:
            if shard.error is None:
                readable.append(shard)
                continue
            timing = rec.open_shard(Path(shard.path).name)  # every rank skips it alike: no collective
            rec.close_shard(timing, UnreadableShard(shard.error))
        for i in range(0, len(readable), size):
            self._load_batch(fst, pg, rank, ctx, model.role, readable[i : i + size], rec)

    def _make_group_late(self, ctx: LoadContext) -> Any:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.group.WORLD
        raise StrategyUnavailable(
            "fastsafetensors with TP > 1 needs a process group: run the replay through ckptprof (it prepares one)"
        )

    def _load_batch(
        self,
        fst: ModuleType,
        pg: Any,
        rank: int,
        ctx: LoadContext,
        role: str,
        batch: list[ShardPlan],
        rec: Recorder,
    ) -> None:
        timings = {
            s.path: rec.open_shard(Path(s.path).name, nonresident_bytes=nonresident(s.path, s.bytes))
            for s in batch
        }
        where = {name: s.path for s in batch for name in (s.tensors or {})}
        own = batch[rank] if rank < len(batch) else None
        error: BaseException | None = None
        try:
            self._copy_batch(fst, pg, ctx, role, batch, own, timings, where, rec)
        except Exception as exc:
            error = exc
        for timing in timings.values():
            rec.close_shard(timing, error)

    def _copy_batch(
        self,
        fst: ModuleType,
        pg: Any,
        ctx: LoadContext,
        role: str,
        batch: list[ShardPlan],
        own: ShardPlan | None,
        timings: dict[str, ShardTiming],
        where: dict[str, str],
        rec: Recorder,
    ) -> None:
        nogds = ctx.device.type != "cuda" if self.nogds is None else self.nogds
        loader = fst.SafeTensorsFileLoader(
            pg, str(ctx.device), nogds=nogds, max_threads=self.max_threads, bbuf_size_kb=self.bbuf_size_kb
        )
        try:
            loader.add_filenames({r: [s.path] for r, s in enumerate(batch)})
            first = timings[(own or batch[0]).path]
            # fastsafetensors reads on its own threads: count the process's storage bytes, not this thread's.
            with rec.read(own.bytes if own is not None else 0, shard=first, process=True):
                buffers = loader.copy_files_to_device()
            try:
                # Every rank walks the same keys in the same order (each get_tensor is a collective): file by
                # file, in the batch's order, each file's keys in the order fastsafetensors lists them.
                keys = list(buffers.key_to_rank_lidx)
                for shard in batch:
                    with rec.use_shard(timings[shard.path]):
                        for name in keys:
                            if where.get(name, batch[0].path) == shard.path:
                                self._hand_over(buffers, ctx, role, name, rec)
            finally:
                buffers.close()
        finally:
            loader.close()
        if ctx.device.type == "cuda":
            # Broadcasts are asynchronous: the batch is loaded when they have landed.
            torch.cuda.synchronize(ctx.device)

    @staticmethod
    def _hand_over(buffers: Any, ctx: LoadContext, role: str, name: str, rec: Recorder) -> None:
        with rec.deserialize():
            full = buffers.get_tensor(name)  # a broadcast from the rank that read the file
        src = ctx.narrow(role, name, full)
        if src is not None:
            with rec.h2d(src.numel() * src.element_size()):
                ctx.copy(role, name, src)
        rec.tensor_done()
