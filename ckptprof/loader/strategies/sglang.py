"""SGLang's default path: ``safe_open`` each shard (mmap), ``get_tensor`` every key, narrow, ``copy_``.

This is ``DefaultModelLoader`` with ``safetensors_weights_iterator`` on one thread, what a server runs without
``--weight-loader-disable-mmap``, multithread loading or prefetching.

Decomposing a shard whose bytes are not all cached, with ``read_ahead=true`` (off by default until this form is
measured on a GPU; a tensor-level first version was: reports/h200/2026-11-30c-h200x2-run): in SGLang's own
sequence the kernel's read-ahead fetches the next pages while ``copy_`` copies the resident ones, so storage and
copies overlap; faulting each tensor in and then copying it, one after the other, times that overlap away (the
phases of a cold load then add up to more than SGLang's wall: reports/h200/2026-11-30c-h200x2-run). With
``read_ahead``, each tensor's slice is copied in blocks of rows (``block_mib``) and one read-ahead thread faults the
next ``depth`` blocks in (timed as "read", with its own faults and storage bytes) while the rank copies the current
one (timed as "h2d"), so the storage keeps working during the copies as it does under SGLang. A cached shard is
decomposed one tensor after the other: there is no read-ahead I/O to overlap with.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import torch
from safetensors import safe_open

from ckptprof.checkpoint import pickled
from ckptprof.loader.plan import ModelPlan, ReplayPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import KeptDescriptors, LoadContext, Strategy, replay_tensor
from ckptprof.loader.touch import fault_in, read_header_region
from ckptprof.session import ShardTiming


@dataclass
class _Block:
    src: torch.Tensor  # rows of the rank's slice (a view of the mapped file)
    dest: torch.Tensor  # the same rows of the parameter
    file_bytes: int  # its part of the tensor's bytes (the serial pass counts the whole tensor as read)
    last: bool  # the tensor's last block


class SGLang(Strategy):
    name = "sglang"
    flags = "(default: no flags)"

    def __init__(self, read_ahead: bool = False, block_mib: int = 16, depth: int = 2) -> None:
        if block_mib < 1 or depth < 1:
            raise ValueError("block_mib and depth must be at least 1")
        self.read_ahead = read_ahead
        self.block_mib = block_mib
        self.depth = depth
        # The faithful pass's shards, opened before the timed load (see prepare).
        self._kept = KeptDescriptors()

    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """On the faithful pass, open every shard once before the timed load for its residency checks
        (``KeptDescriptors``). The decomposed pass keeps opening at each shard: its wall is not the one compared
        with SGLang's."""
        self._kept.close()
        if not ctx.decompose:
            self._kept.open(plan)

    def close(self) -> None:
        self._kept.close()

    def _nonresident(self, path: str, size: int) -> int:
        """Bytes of the shard not in the page cache now (0 when residency cannot be read), as ``nonresident``."""
        return self._kept.nonresident(path, size)

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        with ExitStack() as pool_scope:
            # A pool starts its thread at the first submit: nothing runs unless a cold shard needs it.
            ahead = (
                pool_scope.enter_context(
                    ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptprof-read-ahead")
                )
                if ctx.decompose and self.read_ahead
                else None
            )
            for shard in model.shards:
                nonresident = self._nonresident(shard.path, shard.bytes)
                try:
                    with rec.shard(os.path.basename(shard.path), nonresident_bytes=nonresident) as timing:
                        if shard.error is not None:
                            raise UnreadableShard(shard.error)
                        if ahead is not None and nonresident > 0 and not pickled.is_pickle(shard.path):
                            self._load_shard_read_ahead(ctx, model.role, shard.path, rec, timing, ahead)
                        else:
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
            handle, keys = self._open(stack, path, rec, ctx.decompose)
            for name in keys:
                with rec.deserialize():
                    full = handle.get_tensor(name)
                replay_tensor(ctx, role, name, full, rec)
                del full

    @staticmethod
    def _open(stack: ExitStack, path: str, rec: Recorder, decompose: bool) -> tuple[Any, list[str]]:
        """``safe_open`` the shard (closed with ``stack``) and list its keys; decomposing, its header is read
        first under "read", so a cold header's disk round-trip is not blamed on deserialisation."""
        if decompose:
            with rec.read(0):
                read_header_region(path)
        with rec.deserialize():
            handle = stack.enter_context(safe_open(path, framework="pt", device="cpu"))
            keys = list(handle.keys())
        return handle, keys

    def _load_shard_read_ahead(
        self,
        ctx: LoadContext,
        role: str,
        path: str,
        rec: Recorder,
        timing: ShardTiming,
        ahead: ThreadPoolExecutor,
    ) -> None:
        """The decomposed sequence in blocks of rows, the next blocks faulted in (by the read-ahead thread) while
        this one is copied - at most ``depth`` blocks ahead, like the kernel's read-ahead window."""

        def fault(block: torch.Tensor, nbytes: int) -> None:
            with rec.read(nbytes, shard=timing):
                fault_in(block)

        with ExitStack() as stack:
            handle, keys = self._open(stack, path, rec, decompose=True)
            blocks = self._blocks(ctx, role, handle, keys, rec)
            window: deque[tuple[_Block, Future[None]]] = deque()
            try:
                while True:
                    while len(window) < self.depth:
                        block = next(blocks, None)
                        if block is None:
                            break
                        window.append((block, ahead.submit(fault, block.src, block.file_bytes)))
                    if not window:
                        break
                    block, job = window.popleft()
                    job.result()  # storage time the copies could not hide: in the wall, in no phase
                    with rec.h2d(block.src.numel() * block.src.element_size()):
                        block.dest.copy_(block.src)
                    if block.last:
                        rec.tensor_done()
            finally:
                for _, job in window:  # after a failure too: no read-ahead may outlive the mapping
                    job.exception()

    def _blocks(
        self, ctx: LoadContext, role: str, handle: Any, keys: list[str], rec: Recorder
    ) -> Iterator[_Block]:
        """Each tensor's slice as blocks of whole rows (dim 0) of about ``block_mib``, in SGLang's key order."""
        limit = self.block_mib * 1024 * 1024
        for name in keys:
            with rec.deserialize():
                full = handle.get_tensor(name)
                src = ctx.narrow(role, name, full)
            if src is None:
                rec.tensor_done()
                continue
            dest = ctx.destination(role, name)
            total = full.numel() * full.element_size()  # counted as read, as the serial pass counts it
            rows = src.shape[0] if src.dim() > 0 else 0
            row_bytes = total // max(1, full.shape[0]) if full.dim() > 0 else total
            step = max(1, limit // max(1, row_bytes))
            if rows <= step:
                yield _Block(src, dest, total, last=True)
                continue
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                # The tensor's bytes spread over its blocks in proportion to their rows; they add up to the total.
                nbytes = total * r1 // rows - total * r0 // rows
                yield _Block(src.narrow(0, r0, r1 - r0), dest.narrow(0, r0, r1 - r0), nbytes, last=r1 == rows)

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
                        began = rec.copy_began()
                        ctx.copy(role, name, src)
                        rec.copy_ended(began)
                    tensors += 1
        finally:
            rec.add_counts(nbytes, h2d_bytes, tensors)
