"""The rank's side of a loader whose own threads read every file and hand tensors over one at a time (Run:ai
Model Streamer, InstantTensor): which shard each tensor belongs to, when a shard is done, what it cost.

Every readable shard is opened at once (the library reads them all together); an unreadable one fails alone. Each
wait for the next tensor is booked as "read" on the shard the tensor came from, with the process's storage bytes
(the library's threads read); bytes those threads read ahead while the rank copied are settled as each shard
closes, so the rank's total is exact. The narrow + copy is SGLang's weight loader (``copy_slice``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from ckptprof.loader.plan import ModelPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, copy_slice, nonresident
from ckptprof.session import ShardTiming


class StreamedLoad:
    def __init__(self, model: ModelPlan, rec: Recorder) -> None:
        self.rec = rec
        self.role = model.role
        readable = []
        for shard in model.shards:
            if shard.error is None and shard.tensors is not None:
                readable.append(shard)
                continue
            timing = rec.open_shard(Path(shard.path).name)  # every rank skips it alike: no collective
            rec.close_shard(timing, UnreadableShard(shard.error or "header not readable"))
        self.paths = [s.path for s in readable]
        self.timings: dict[str, ShardTiming] = {
            s.path: rec.open_shard(Path(s.path).name, nonresident_bytes=nonresident(s.path, s.bytes))
            for s in readable
        }
        self.left = {s.path: len(s.tensors or {}) for s in readable}
        self.where = {name: s.path for s in readable for name in (s.tensors or {})}
        self.started = rec.process_storage_bytes()

    @property
    def first(self) -> ShardTiming:
        """The first shard: set-up (headers, submissions) is booked there."""
        return self.timings[self.paths[0]]

    def consume(
        self,
        ctx: LoadContext,
        tensors: Iterator[tuple[str, torch.Tensor]],
        shard_done: Callable[[], None] | None = None,
    ) -> None:
        """Take every tensor the library yields into the rank's parameters; ``shard_done`` runs before a shard
        closes (e.g. waiting for device copies)."""
        rec = self.rec
        while True:
            with rec.read_awaited() as awaited:
                item = next(tensors, None)
                path = self.where.get(item[0]) if item is not None else None
                if item is not None and path is not None:
                    awaited.shard = self.timings[path]
                    awaited.nbytes = item[1].numel() * item[1].element_size()
            if item is None:
                return
            if path is None:
                continue  # a tensor the plan does not know (the header changed since): not a parameter
            name, full = item
            timing = self.timings[path]
            with rec.use_shard(timing):
                copy_slice(ctx, self.role, name, full, rec)
            del full, item
            self.left[path] -= 1
            if self.left[path] == 0:
                if shard_done is not None:
                    shard_done()
                rec.settle_storage(timing, self.started, self.timings.values())
                rec.close_shard(timing)

    def run(self, body: Callable[[StreamedLoad], None], ended_early: str) -> None:
        """``body(self)`` drives the library; a failure fails the shards it left open (the next model still loads),
        and ``ended_early`` names what happened to shards whose tensors never came."""
        if not self.paths:
            return
        error: BaseException | None = None
        try:
            body(self)
        except Exception as exc:
            error = exc
        self.finish(error, ended_early)

    def finish(self, error: BaseException | None, ended_early: str) -> None:
        """Close what is still open: with the load's error, or ``ended_early`` for tensors that never came."""
        for path, timing in self.timings.items():
            if self.left.get(path, 0) > 0 or error is not None:
                self.rec.close_shard(timing, error or RuntimeError(ended_early))
