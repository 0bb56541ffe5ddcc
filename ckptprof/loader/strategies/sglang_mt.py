"""SGLang's ``enable_multithread_load``: a thread pool opens shard files while the rank's loop copies.

Each pool task does what ``safe_open`` + ``get_tensor`` for every key does (mmap views: no tensor bytes are read
yet); the rank's own thread then narrows each tensor and copies its slice, so the page faults still happen
there, one shard after another. Two variants, as SGLang releases differ:

- ``sglang-mt`` (newer releases, the default there): a sliding window of ``num_threads + 1`` files in flight,
  consumed in submission order;
- ``sglang-mt-completed`` (older releases): every file submitted at once, consumed in completion order.

Shards are opened explicitly: the pool thread records the open under "deserialize" against the shard, the rank's
thread records faults and copies against the same shard, and the shard's wall spans its first to last event.

The faithful pass times no phase, and records less: each thread keeps its stretch of a shard's work (two clock reads
and two reads of its counters, one system call each while warm) on the shard's own object, and the rank's thread
books the shard whole once its copies are done (``Recorder.add_stretched_shard``). Neither the pool's task nor the
copying thread takes the recorder's lock or a shard's state in between: on the H200 at TP8 the recorder's per-shard
blocks on both threads cost the rank's thread ~8 ms of a ~0.22 s load outside its copies (the 8 rank processes'
pool threads and copying threads contending for each process's lock and GIL), where the plain loop spent none.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan, ReplayPlan, ShardPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder, Stretch
from ckptprof.loader.strategies.base import KeptDescriptors, LoadContext, Strategy, replay_tensor
from ckptprof.loader.touch import read_header_region
from ckptprof.session import ShardTiming

DEFAULT_THREADS = 8


def mt_flags(num_threads: int) -> str:
    return sglang_flags.multithread(num_threads)


@dataclass
class _Opened:
    """What one pool task hands back: the shard's record and its tensors (views onto the mapped file). On the
    faithful pass the record is made only when the shard is done (``timing`` None until then): the task leaves its
    file name, the bytes not resident at its start and its stretch of work."""

    timing: ShardTiming | None
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    error: BaseException | None = None
    file: str = ""
    nonresident_bytes: int = 0
    stretches: list[Stretch] = field(default_factory=list)


def _open_all(path: str) -> dict[str, torch.Tensor]:
    """SGLang's pool task: ``safe_open`` and ``get_tensor`` for every key. The views keep the mapping alive after
    the handle closes, as SGLang's task relies on."""
    with safe_open(path, framework="pt", device="cpu") as handle:
        keys = list(handle.keys())
        return {name: handle.get_tensor(name) for name in keys}


class SGLangMultiThread(Strategy):
    """``enable_multithread_load`` with ``num_threads`` pool threads; ``in_order`` picks the newer variant."""

    def __init__(self, num_threads: int = DEFAULT_THREADS, in_order: bool = True) -> None:
        if num_threads < 1:
            raise ValueError(f"num_threads must be at least 1, got {num_threads}")
        self.num_threads = num_threads
        self.in_order = in_order
        self.name = "sglang-mt" if in_order else "sglang-mt-completed"
        self.flags = mt_flags(num_threads) + (
            "" if in_order else " (releases that yield in completion order)"
        )
        # The faithful pass's shards, opened before the timed load for their residency checks (see prepare).
        self._kept = KeptDescriptors()

    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """On the faithful pass, open every shard before the timed load, as the single-thread path does: a pool
        task then asks for a shard's residency on a descriptor, not with an open, an fstat and a close of its
        path (all inside the wall, and holding the GIL the rank's thread needs between its copies)."""
        self._kept.close()
        if not ctx.decompose:
            self._kept.open(plan)

    def close(self) -> None:
        self._kept.close()

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        faithful = not ctx.decompose and not rec.times_phases
        task = self._open_faithful if faithful else self._open
        consume = self._consume_faithful if faithful else self._consume
        with ThreadPoolExecutor(max_workers=self.num_threads, thread_name_prefix="ckptprof-mt") as pool:
            for opened in self._opened(pool, ctx, model, rec, task):
                consume(ctx, model.role, opened, rec)

    def _opened(
        self,
        pool: ThreadPoolExecutor,
        ctx: LoadContext,
        model: ModelPlan,
        rec: Recorder,
        task: Callable[[LoadContext, ShardPlan, Recorder], _Opened],
    ) -> Iterator[_Opened]:
        if not self.in_order:
            futures = [pool.submit(task, ctx, shard, rec) for shard in model.shards]
            for done in as_completed(futures):
                yield done.result()
            return
        # The newer loader keeps num_threads + 1 files in flight and hands them over in submission order.
        window: deque[Future[_Opened]] = deque()
        pending = iter(model.shards)
        for shard in pending:
            window.append(pool.submit(task, ctx, shard, rec))
            if len(window) > self.num_threads:
                break
        while window:
            yield window.popleft().result()
            nxt = next(pending, None)
            if nxt is not None:
                window.append(pool.submit(task, ctx, nxt, rec))

    def _open(self, ctx: LoadContext, shard: ShardPlan, rec: Recorder) -> _Opened:
        """The pool task: ``safe_open`` + ``get_tensor`` for every key (no tensor bytes read yet)."""
        missing = self._kept.nonresident(shard.path, shard.bytes)
        timing = rec.open_shard(Path(shard.path).name, nonresident_bytes=missing)
        opened = _Opened(timing=timing)
        try:
            if shard.error is not None:
                raise UnreadableShard(shard.error)
            with rec.use_shard(timing):
                self._open_views(ctx, shard, rec, opened)
        except Exception as exc:
            opened.error = exc
        return opened

    def _open_faithful(self, ctx: LoadContext, shard: ShardPlan, rec: Recorder) -> _Opened:
        """The faithful pass's pool task: SGLang's task between two clock reads and two reads of the thread's
        counters, kept on the shard's object (no recorder call that takes a lock)."""
        opened = _Opened(
            timing=None,
            file=os.path.basename(shard.path),
            nonresident_bytes=self._kept.nonresident(shard.path, shard.bytes),
        )
        began = rec.stretch_began()
        try:
            if shard.error is not None:
                raise UnreadableShard(shard.error)
            opened.tensors = _open_all(shard.path)
        except Exception as exc:
            opened.error = exc
        opened.stretches.append(rec.stretch_ended(began))
        return opened

    @staticmethod
    def _open_views(ctx: LoadContext, shard: ShardPlan, rec: Recorder, opened: _Opened) -> None:
        if ctx.decompose:
            with rec.read(0):
                read_header_region(shard.path)
        with rec.deserialize():
            opened.tensors = _open_all(shard.path)

    def _consume(self, ctx: LoadContext, role: str, opened: _Opened, rec: Recorder) -> None:
        """The rank's loop: narrow each tensor, fault its slice in, copy it into the parameter."""
        timing = opened.timing
        assert timing is not None  # the decomposed pass's task opens the record
        if opened.error is not None:
            rec.close_shard(timing, opened.error)
            return
        try:
            with rec.use_shard(timing):
                for name, full in opened.tensors.items():
                    replay_tensor(ctx, role, name, full, rec)
                    del full
        except Exception as exc:
            rec.close_shard(timing, exc)
            return
        finally:
            opened.tensors.clear()  # drop the views (and with the last one, the mapping) before the next file
        rec.close_shard(timing)

    @staticmethod
    def _consume_faithful(ctx: LoadContext, role: str, opened: _Opened, rec: Recorder) -> None:
        """The faithful pass's loop on the rank's thread: narrow and copy each tensor and nothing between them but a
        copy's two clock reads, as the single-thread path's ``_load_shard_wall_only`` (the wall-only recorder times
        no phase, so the per-tensor phase blocks of ``replay_tensor`` - four context managers and four locks a
        tensor - would only add to the wall). Its stretch, the bytes and the tensors are counted here, and the shard
        is booked whole once its views are dropped, failed where its open or a copy failed."""
        if opened.error is not None:
            rec.add_stretched_shard(
                opened.file, opened.nonresident_bytes, opened.stretches, error=opened.error
            )
            return
        nbytes = h2d_bytes = tensors = 0
        error: BaseException | None = None
        began = rec.stretch_began()
        try:
            for name, full in opened.tensors.items():
                src = ctx.narrow(role, name, full)
                if src is not None:
                    nbytes += full.numel() * full.element_size()
                    h2d_bytes += src.numel() * src.element_size()
                    copy_began = rec.copy_began()
                    ctx.copy(role, name, src)
                    rec.copy_ended(copy_began)
                tensors += 1
        except Exception as exc:
            error = exc
        opened.stretches.append(rec.stretch_ended(began))
        opened.tensors.clear()  # drop the views (and with the last one, the mapping) before the next file
        rec.add_stretched_shard(
            opened.file, opened.nonresident_bytes, opened.stretches, (nbytes, h2d_bytes, tensors), error
        )
