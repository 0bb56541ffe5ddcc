"""``pipelined-shared``: every byte of the checkpoint read once per node, however many TP ranks need it.

SGLang at TP N has each rank read every file (read amplification N; the page cache saves storage the repeats
when it can hold the files, never the copies out of it). Here the ranks take turns instead:

- Every rank cuts the model's files into the same chunks (whole rows of whole tensors, at most ``chunk_mib``
  MiB; a tensor larger than a chunk is split between rows) and numbers them in file order. Chunk ``i`` is read by
  rank ``i % N``, by one of its ``readers`` threads in one ``os.preadv``, O_DIRECT when the file is mostly not in
  the page cache (``direct="auto"``; only one rank reads each byte, so no rank's read is another's cache hit).
- The chunk lands in host memory all ranks share (``loader/sharedmem.py``: one memfd, registered with CUDA on a
  GPU so copies out of it are DMA). Each rank owns ``slots`` slots (default: one per reader thread, plus one):
  while the ranks copy their slices out of round ``t``'s chunks, the readers fill the next ``slots - 1`` rounds'.
  A barrier of the ranks' gloo group per round says when every chunk of a round is in place and every slot of
  the round before is free again.
- Each rank copies only its TP slice of each tensor out of every chunk: a block of rows (column-parallel), a
  column band of every row (row-parallel: gathered on the host into pinned scratch, so only the rank's bytes
  cross its link), or the whole tensor (replicated). Copies go out asynchronously on a side stream, which is
  drained before the barrier that lets the slot be overwritten.

Not implemented: a device-side hand-over where ranks own distinct GPUs (the chunk copied whole to its reader's GPU,
then sent on to the others over NVLink with NCCL). For TP-sliced tensors it would move as many bytes through host
memory as this does (each rank's slice crosses from host memory once either way); it would spare only the repeated
copies of replicated tensors (a few percent of an EAGLE-3 draft's bytes: norms, small tables), and NCCL takes one
rank per device, so ranks sharing a GPU (TP8 over 2 GPUs) would still need the shared host memory. Every case goes
through it.

Recorded per rank: its own chunk reads as "read" (with their bytes), the wait for the other ranks' chunks as "read"
with no bytes, the copies out of the shared memory as "h2d"; the header parse and the chunk plan as "deserialize".
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import torch

from ckptprof.checkpoint.header import DTYPE_BITS, ShardHeader, TensorEntry, read_header
from ckptprof.loader.plan import ModelPlan, ReplayPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.sharedmem import SharedRegion
from ckptprof.loader.strategies.base import LoadContext, Strategy, nonresident
from ckptprof.loader.strategies.groups import close_group, make_group
from ckptprof.loader.strategies.pipelined import ALIGN, DIRECT_MODES, default_readers
from ckptprof.session import ShardTiming

DEFAULT_CHUNK_MIB = 64.0
# A failed barrier looks this many times, this far apart, whether a peer rank's process ended (about 1 s).
PEER_EXIT_TRIES = 50
PEER_EXIT_STEP_S = 0.02
_OK, _FAILED = 0, 1


def _align_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _rows(shape: tuple[int, ...], nbytes: int) -> tuple[int, int]:
    """(rows, bytes per row) of a stored tensor: rows along dim 0; a scalar or empty leading dim is one row."""
    if not shape or shape[0] <= 0:
        return 1, nbytes
    return shape[0], nbytes // shape[0]


def _row_bytes(dtype: str, shape: tuple[int, ...]) -> int:
    bits = DTYPE_BITS.get(dtype, 8)
    inner = math.prod(shape[1:]) if shape else 1
    return max(1, -(-inner * bits // 8))


@dataclass
class _Part:
    """Rows [r0, r1) of one tensor, at byte ``offset`` from the chunk's start."""

    entry: TensorEntry
    r0: int
    r1: int
    offset: int
    last: bool  # holds the tensor's last row: the tensor is complete once this part is copied


@dataclass
class _Chunk:
    index: int
    file: int  # index into the model's readable files
    start: int  # absolute file offsets of the bytes to read
    end: int
    parts: list[_Part] = field(default_factory=list)

    @property
    def lead(self) -> int:
        """Where the chunk's first byte sits in its slot: its offset's remainder to the O_DIRECT alignment, so
        an aligned direct read and a buffered read leave the bytes at the same place."""
        return self.start % ALIGN


@dataclass
class _ShardFile:
    path: str
    header: ShardHeader
    timing: ShardTiming
    missing: int = 0  # its bytes not in the page cache when the load began (O_DIRECT or not)
    last_chunk: int = -1
    error: BaseException | str | None = None
    direct: bool = False
    fd: int | None = None
    fd_lock: threading.Lock = field(default_factory=threading.Lock)


def plan_chunks(headers: list[ShardHeader], chunk_bytes: int) -> list[_Chunk]:
    """The model's chunks, in file order: whole rows of whole tensors, at most ``chunk_bytes`` each (a row larger
    than that is a chunk of its own). Every rank computes the same list from the same headers."""
    chunks: list[_Chunk] = []
    for fi, header in enumerate(headers):
        current: _Chunk | None = None
        for entry in sorted(header.tensors.values(), key=lambda t: t.begin):
            if entry.nbytes == 0:
                continue
            begin = header.data_start + entry.begin
            rows, row_bytes = _rows(entry.shape, entry.nbytes)
            r = 0
            while r < rows:
                at = begin + r * row_bytes
                if current is not None:
                    fit = max(0, current.start + chunk_bytes - at) // row_bytes
                    if fit == 0:
                        chunks.append(current)
                        current = None
                        continue
                else:
                    current = _Chunk(index=len(chunks), file=fi, start=at, end=at)
                    fit = max(1, chunk_bytes // row_bytes)
                take = min(rows - r, fit)
                current.parts.append(_Part(entry, r, r + take, at - current.start, last=r + take == rows))
                current.end = at + take * row_bytes
                r += take
        if current is not None:
            chunks.append(current)
    return chunks


def _chunks_at_most(model: ModelPlan, chunk_bytes: int) -> int:
    """About the most chunks ``plan_chunks`` cuts a model into, from the plan alone (headers unread): two
    neighbouring chunks of a file hold more than one chunk's bytes (the second's first row did not fit the first),
    so a file gives at most twice its bytes over the chunk size, plus one. Only the read-ahead depth depends on it."""
    return sum(2 * -(-s.bytes // chunk_bytes) + 1 for s in model.shards) or 1


def _dead_peer(peers: dict[int, int]) -> tuple[int, int] | None:
    """(rank, pid) of a peer rank whose process has ended (gone, or a zombie its parent has not reaped yet)."""
    for rank, pid in peers.items():
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return rank, pid
        except psutil.NoSuchProcess:
            return rank, pid
        except psutil.Error:
            continue
    return None


def _plan_digest(chunks: list[_Chunk]) -> str:
    text = ";".join(f"{c.file}:{c.start}:{c.end}" for c in chunks)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class PipelinedShared(Strategy):
    name = "pipelined-shared"
    flags = (
        "not an SGLang flag: each byte read once per node, handed to the TP ranks through shared host memory"
    )

    def __init__(
        self,
        readers: int | None = None,
        chunk_mib: float = DEFAULT_CHUNK_MIB,
        direct: str = "auto",
        slots: int | None = None,
    ) -> None:
        if (readers is not None and readers < 1) or chunk_mib <= 0 or (slots is not None and slots < 2):
            raise ValueError("readers must be at least 1, chunk_mib above 0 and slots at least 2")
        self.slots = slots
        self._slots = 2
        if direct not in DIRECT_MODES:
            raise ValueError(f"direct must be one of {', '.join(DIRECT_MODES)}, got {direct!r}")
        self.readers = readers
        self.chunk_bytes = max(ALIGN, int(chunk_mib * 2**20) // ALIGN * ALIGN)
        self.direct = direct
        self._group: Any = None
        self._store_path: str | None = None
        self._region: SharedRegion | None = None
        self._slot_bytes = 0
        self._ranks = 1
        self._pool: ThreadPoolExecutor | None = None
        self._stream: Any = None
        self._scratch: torch.Tensor | None = None  # pinned: row-parallel bands gathered before their copy
        self._scratch_used = [0, 0]  # bytes taken in each half (round parity) of the scratch
        self._peers: dict[int, int] = {}  # rank -> pid of the other spawned ranks, to name one that died
        self._abandoned = False

    # -- set-up ---------------------------------------------------------------------------------------------------
    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """The ranks' group, the shared slots (pinned on a GPU) and the reader threads, before the timed load."""
        self._setup(ctx, plan.models, f"{plan.run_id}-{'d' if ctx.decompose else 'f'}", plan)

    def _setup(self, ctx: LoadContext, models: list[ModelPlan], tag: str, plan: ReplayPlan | None) -> None:
        if self._region is not None:
            return
        self._ranks = ctx.tp
        if ctx.tp > 1:
            if plan is None:
                raise RuntimeError(
                    "pipelined-shared at TP > 1 runs in rank processes (prepare() makes the group)"
                )
            self._group, self._store_path = make_group(ctx, plan, "sr", nccl_only=False, host_only=True)
            if (
                not ctx.position.torchrun
            ):  # spawned ranks are this node's processes: a dead one is named by its pid
                import torch.distributed as dist

                pids: list[Any] = [None] * ctx.tp
                dist.all_gather_object(pids, os.getpid(), group=self._group)
                self._peers = {r: int(pid) for r, pid in enumerate(pids) if r != ctx.rank}
        # A chunk never spans files: small files need no 64 MiB slots (the memory is shared, pinned and faulted in).
        self._slot_bytes = self._slot_size(models)
        readers = self.readers if self.readers is not None else default_readers(ctx.tp)
        # A whole chunk per read, one read per reader thread in flight, and the slot being copied out: as many
        # reads in flight as pipelined's ring, in as few calls (per-read Python costs GIL hand-overs, so small
        # parts read markedly slower: reports/h200/2026-12-01c-h200-shared-reads). No more slots
        # than the rounds the largest model can need.
        rounds = max(-(-_chunks_at_most(m, self.chunk_bytes) // ctx.tp) for m in models) if models else 1
        self._slots = self.slots if self.slots is not None else max(2, min(readers + 1, rounds + 1))
        status_bytes = _align_up(8 * ctx.tp * self._slots)
        size = self._slot_bytes * ctx.tp * self._slots + status_bytes
        if ctx.rank == 0:
            self._region = SharedRegion.create(tag, size)
        self._barrier()
        if ctx.rank != 0:
            self._region = SharedRegion.attach(tag)
        self._barrier()
        region = self._region
        assert region is not None and region.tensor is not None
        if ctx.rank == 0:
            region.unpublish()
            region.tensor.zero_()  # fault the pages in once, outside the timed load
        if ctx.device.type == "cuda":
            region.pin()
            self._stream = torch.cuda.Stream(device=ctx.device)
            self._scratch = torch.empty(2 * self._slot_bytes, dtype=torch.uint8, pin_memory=True)
        self._pool = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="ckptprof-shared-reader")
        self._barrier()

    def _fits(self, model: ModelPlan) -> bool:
        """Whether the slots hold this model's largest chunk (they were sized for the models set up)."""
        return self._slot_size([model]) <= self._slot_bytes

    def _slot_size(self, models: list[ModelPlan]) -> int:
        """Bytes of a slot: the largest chunk (a chunk never spans files, nor splits a row) and O_DIRECT's margins."""
        widest = max(
            (
                _row_bytes(dtype, shape)
                for m in models
                for s in m.shards
                for dtype, shape in (s.tensors or {}).values()
            ),
            default=0,
        )
        largest = max((s.bytes for m in models for s in m.shards), default=0)
        return _align_up(max(min(self.chunk_bytes, largest), widest) + 2 * ALIGN)

    def _barrier(self) -> None:
        """Wait for every rank. A rank that died (its peers cannot go on without its chunks) closes its sockets:
        gloo then fails the wait at once, and the error names the rank instead of gloo's "Connection closed"."""
        if self._group is None:
            return
        import torch.distributed as dist

        try:
            dist.barrier(group=self._group)
        except RuntimeError:
            # A killed peer's sockets close while its process is still exiting: give it a moment to be seen gone.
            tries = PEER_EXIT_TRIES if self._peers else 0
            pause = threading.Event()  # never set: its wait is a pause (strategies read no clock)
            while (dead := _dead_peer(self._peers)) is None and tries > 0:
                tries -= 1
                pause.wait(PEER_EXIT_STEP_S)
            if dead is None:
                raise
            self._abandoned = True
            raise RuntimeError(
                f"rank {dead[0]} (pid {dead[1]}) died during the load; the ranks sharing its reads stop"
            ) from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._stream is not None:
            self._stream.synchronize()
            self._stream = None
        self._scratch = None
        if self._region is not None:
            self._region.close()
            self._region = None
        if not self._abandoned:  # a group whose peer died is left as it is: tearing it down would wait on it
            close_group(self._store_path)
        self._store_path = None
        self._group = None

    # -- layout of the shared memory ------------------------------------------------------------------------------
    def _slot(self, owner: int, round_: int) -> torch.Tensor:
        assert self._region is not None and self._region.tensor is not None
        start = (owner * self._slots + round_ % self._slots) * self._slot_bytes
        return self._region.tensor[start : start + self._slot_bytes]

    def _status(self) -> torch.Tensor:
        assert self._region is not None and self._region.tensor is not None
        base = self._slot_bytes * self._ranks * self._slots
        return self._region.tensor[base : base + 8 * self._ranks * self._slots].view(torch.int64)

    # -- the load -------------------------------------------------------------------------------------------------
    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        if self._region is not None and self._group is None and not self._fits(model):
            self.close()  # loaded without prepare() (one rank in-process): the slots were sized for another model
        self._setup(ctx, [model], f"{os.getpid()}-{id(self)}", None)  # no-op after prepare()
        files, chunks = self._open_files(ctx, model, rec)
        self._check_same_plan(chunks)
        ranks = self._ranks
        rounds = -(-len(chunks) // ranks)
        # A round's copies may still run while the next round is copied out: they are waited for only before
        # the barrier ``lag`` rounds later, and the readers stay that many rounds behind the slots they reuse.
        lag = 2 if self._slots >= 3 else 1
        ahead = self._slots - lag  # rounds read ahead of the one being copied out
        inflight: deque[tuple[int, Any, list[_ShardFile]]] = (
            deque()
        )  # (round, its copies' event, files it completes)
        try:
            pending = {r: self._read_round(ctx, files, chunks, r, rec) for r in range(min(ahead, rounds))}
            for t in range(rounds):
                self._wait_reads(pending.pop(t, []))
                while inflight and inflight[0][0] <= t - lag:
                    self._retire(inflight.popleft(), rec)
                first = files[chunks[t * ranks].file]
                with rec.read(0, shard=first.timing):  # waiting for the other ranks' chunks of this round
                    self._barrier()
                # Round t + ahead reuses the slots of round t - lag, which every rank finished before the barrier.
                if t + ahead < rounds:
                    pending[t + ahead] = self._read_round(ctx, files, chunks, t + ahead, rec)
                completes = []
                for owner in range(ranks):
                    i = t * ranks + owner
                    if i >= len(chunks):
                        break
                    self._copy_out(ctx, model.role, files, chunks[i], owner, t, rec)
                    f = files[chunks[i].file]
                    if f.last_chunk == i:
                        completes.append(f)
                inflight.append((t, self._mark(), completes))
            while inflight:
                self._retire(inflight.popleft(), rec)
        finally:
            for f in files:
                if f.fd is not None:
                    with suppress(OSError):
                        os.close(f.fd)
                    f.fd = None
                if f.last_chunk >= 0 or f.error is not None:
                    self._finish(f, rec)

    def _mark(self) -> Any:
        """An event after every copy issued so far (None on CPU, where copies are done when issued)."""
        if self._stream is None:
            return None
        event = torch.cuda.Event()
        event.record(self._stream)
        return event

    def _retire(self, done: tuple[int, Any, list[_ShardFile]], rec: Recorder) -> None:
        """Wait for a round's copies (its slots and scratch are then free) and close the files it completed."""
        t, event, completes = done
        if event is not None:
            event.synchronize()
        self._scratch_used[t % 2] = 0
        for f in completes:
            self._finish(f, rec)

    def _finish(self, f: _ShardFile, rec: Recorder) -> None:
        if f.last_chunk == -2:
            return
        rec.close_shard(f.timing, f.error)
        f.last_chunk = -2  # closed

    def _open_files(
        self, ctx: LoadContext, model: ModelPlan, rec: Recorder
    ) -> tuple[list[_ShardFile], list[_Chunk]]:
        """Every rank parses every header (a few kB each) and cuts the same chunks."""
        files: list[_ShardFile] = []
        for shard in model.shards:
            missing = nonresident(shard.path, shard.bytes)
            timing = rec.open_shard(Path(shard.path).name, nonresident_bytes=missing)
            try:
                if shard.error is not None:
                    raise UnreadableShard(shard.error)
                with rec.read(0, shard=timing):
                    header = read_header(shard.path)
            except Exception as exc:
                rec.close_shard(timing, exc)
                continue
            files.append(_ShardFile(path=shard.path, header=header, timing=timing, missing=missing))
        with rec.deserialize(shard=files[0].timing) if files else nullcontext():
            chunks = plan_chunks([f.header for f in files], self.chunk_bytes)
        for c in chunks:
            files[c.file].last_chunk = c.index
        for f in files:
            if f.last_chunk < 0:  # a file holding no tensor bytes is done already
                self._finish(f, rec)
        return files, chunks

    def _check_same_plan(self, chunks: list[_Chunk]) -> None:
        """Ranks that cut different chunks (a file that changed between their header reads) would copy each
        other's bytes into the wrong tensors: stop them all instead."""
        if self._group is None:
            return
        import torch.distributed as dist

        mine = _plan_digest(chunks)
        everyone: list[Any] = [None] * self._ranks
        dist.all_gather_object(everyone, mine, group=self._group)
        if len(set(everyone)) != 1:
            raise RuntimeError("the ranks read different headers (a file changed during the load)")

    # -- reading --------------------------------------------------------------------------------------------------
    def _read_round(
        self, ctx: LoadContext, files: list[_ShardFile], chunks: list[_Chunk], t: int, rec: Recorder
    ) -> list[Future[Any]]:
        """Start reading this rank's chunk of round ``t`` (if it has one) into its slot; returns the reads."""
        i = t * self._ranks + ctx.rank
        if i >= len(chunks):
            return []
        chunk = chunks[i]
        f = files[chunk.file]
        slot = self._slot(ctx.rank, t)
        status = self._status()
        status_index = ctx.rank * self._slots + t % self._slots
        assert self._pool is not None
        try:
            self._open(f)
        except OSError as exc:
            f.error = f.error or exc
            status[status_index] = _FAILED
            return []
        status[status_index] = _OK
        lo = chunk.start - chunk.lead
        hi = _align_up(chunk.end) if f.direct else chunk.end
        start = lo if f.direct else chunk.start
        if hi - lo > self._slot_bytes:  # never write past the slot into the next one
            raise RuntimeError(f"a chunk of {hi - lo} bytes exceeds the {self._slot_bytes}-byte slots")
        return [
            self._pool.submit(self._read_part, f, chunk, slot, lo, (start, hi), rec, status, status_index)
        ]

    def _open(self, f: _ShardFile) -> None:
        with f.fd_lock:
            if f.fd is not None:
                return
            # Decided on the residency every rank saw at the start: by a rank's first chunk of the file, other
            # ranks may have read some of it, and measuring again would cost a residency scan of the whole file.
            want_direct = self.direct == "always" or (
                self.direct == "auto" and f.missing > f.header.file_size // 2
            )
            if want_direct and hasattr(os, "O_DIRECT"):
                try:
                    f.fd = os.open(f.path, os.O_RDONLY | os.O_DIRECT)
                    f.direct = True
                    return
                except OSError as exc:
                    if exc.errno != errno.EINVAL:  # tmpfs and some FUSE file systems refuse O_DIRECT
                        raise
            f.fd = os.open(f.path, os.O_RDONLY)
            f.direct = False

    def _read_part(
        self,
        f: _ShardFile,
        chunk: _Chunk,
        slot: torch.Tensor,
        lo: int,
        span: tuple[int, int],
        rec: Recorder,
        status: torch.Tensor,
        status_index: int,
    ) -> None:
        """Read file bytes [at, stop) into the slot, whose byte 0 is file offset ``lo``."""
        at, stop = span
        counted = max(0, min(stop, chunk.end) - max(at, chunk.start))
        try:
            host = slot.numpy()
            with rec.read(counted, shard=f.timing):
                got = 0
                while at + got < stop:
                    try:
                        n = os.preadv(self._fd(f), [host[at - lo + got : stop - lo].data], at + got)
                    except OSError as exc:
                        if not (f.direct and exc.errno == errno.EINVAL):
                            raise
                        self._go_buffered(f)  # O_DIRECT refused at read time: this file reads buffered now
                        continue
                    if n <= 0:
                        break
                    got += n
            if at + got < min(stop, f.header.file_size):
                raise OSError(errno.EIO, f"short read: {got} of {stop - at} bytes at offset {at} of {f.path}")
        except BaseException as exc:
            status[status_index] = _FAILED
            f.error = f.error or exc
            raise

    @staticmethod
    def _fd(f: _ShardFile) -> int:
        with f.fd_lock:
            assert f.fd is not None
            return f.fd

    @staticmethod
    def _go_buffered(f: _ShardFile) -> None:
        with f.fd_lock:
            if f.direct and f.fd is not None:
                old, f.fd, f.direct = f.fd, os.open(f.path, os.O_RDONLY), False
                with suppress(OSError):
                    os.close(old)

    @staticmethod
    def _wait_reads(pending: list[Future[Any]]) -> None:
        """Wait for this rank's reads; a failed one has already marked its file and its slot failed."""
        for future in pending:
            future.exception()

    # -- copying out ----------------------------------------------------------------------------------------------
    def _copy_out(
        self,
        ctx: LoadContext,
        role: str,
        files: list[_ShardFile],
        chunk: _Chunk,
        owner: int,
        t: int,
        rec: Recorder,
    ) -> None:
        """Copy this rank's slices of the tensors in ``chunk`` (read by ``owner`` in round ``t``)."""
        f = files[chunk.file]
        if int(self._status()[owner * self._slots + t % self._slots]) != _OK:
            if owner != ctx.rank:
                f.error = f.error or (
                    f"rank {owner} could not read bytes {chunk.start}-{chunk.end} of {Path(f.path).name}"
                )
            return
        if f.error is not None:
            return
        slot = self._slot(owner, t)
        copies: list[tuple[torch.Tensor, torch.Tensor]] = []
        finished = 0
        for part in chunk.parts:
            mine = _slice_copies(ctx, role, part, slot, chunk.lead)
            copies.extend(mine)
            if part.last and (role, part.entry.name) in ctx.params:
                finished += 1
        nbytes = sum(src.numel() for _, src in copies)
        if copies:
            with self._on_stream(), rec.h2d(nbytes, shard=f.timing):
                for dst, src in copies:
                    dst.copy_(self._contiguous(src, t), non_blocking=True)
        for _ in range(finished):
            rec.tensor_done(shard=f.timing)

    def _contiguous(self, src: torch.Tensor, t: int) -> torch.Tensor:
        """``src`` itself when its bytes are contiguous; else (a row-parallel band) gathered on the host into
        pinned scratch, so the copy is DMA of this rank's bytes only. (torch would gather into pageable memory,
        whose copy the driver stages synchronously.) Round ``t`` uses half ``t % 2`` of the scratch, free again
        once the round is retired; a round that needs more waits for every copy in flight."""
        if src.is_contiguous() or self._scratch is None:
            return src
        n = src.numel()
        half = self._scratch.numel() // 2
        side = t % 2
        if self._scratch_used[side] + n > half:
            self._drain()
        if n > half:
            return src.contiguous()
        begin = side * half + self._scratch_used[side]
        gathered = self._scratch[begin : begin + n].view(src.shape)
        gathered.copy_(src)
        self._scratch_used[side] += n
        return gathered

    def _drain(self) -> None:
        """Wait for every copy issued so far: the slots and the scratch they read from may be reused after."""
        if self._stream is not None:
            self._stream.synchronize()
        self._scratch_used = [0, 0]

    def _on_stream(self) -> Any:
        return nullcontext() if self._stream is None else torch.cuda.stream(self._stream)


def _slice_copies(
    ctx: LoadContext, role: str, part: _Part, slot: torch.Tensor, lead: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(destination, source) byte views for this rank's slice of rows [r0, r1) of one tensor, or none."""
    key = (role, part.entry.name)
    param = ctx.params.get(key)
    sl = ctx.slices.get(key)
    if param is None or sl is None or sl.skipped:
        return []
    entry = part.entry
    rows, row_bytes = _rows(entry.shape, entry.nbytes)
    count = part.r1 - part.r0
    begin = lead + part.offset
    src = slot[begin : begin + count * row_bytes]
    dst = param.reshape(-1).view(torch.uint8)
    if sl.dim is None:
        return [(dst[part.r0 * row_bytes : part.r1 * row_bytes], src)]
    if sl.dim == 0:  # a block of rows
        q0, q1 = max(part.r0, sl.start), min(part.r1, sl.start + sl.length)
        if q0 >= q1:
            return []
        return [
            (
                dst[(q0 - sl.start) * row_bytes : (q1 - sl.start) * row_bytes],
                src[(q0 - part.r0) * row_bytes : (q1 - part.r0) * row_bytes],
            )
        ]
    if sl.length == 0:
        return []
    # A band of every row (dim 1): the parameter's rows are narrower than the stored ones.
    inner = row_bytes // entry.shape[1]
    band = src.view(count, row_bytes)[:, sl.start * inner : (sl.start + sl.length) * inner]
    return [(dst.view(rows, -1)[part.r0 : part.r1, : sl.length * inner], band)]
