"""ckptprof's own path to the floor: large parallel reads into a ring of pinned buffers, asynchronous copies.

Not an SGLang flag: what a pinned, pipelined loader (fastsafetensors-like) reaches on the same files and devices.

- Each rank reads only the byte ranges it needs. A column-parallel slice (dim 0 of a row-major tensor) is one
  contiguous range; a row-parallel slice (dim 1) needs a segment of every row: the whole rows are read and
  narrowed on the device, unless each row skips at least ``ROW_READ_MIN_SKIP`` bytes, where one read per row
  is cheaper. Replicated tensors are read whole; tensors of other ranks' experts are not read at all.
- The ranges of a file are merged (across small gaps) into requests of at most ``chunk_mib`` MiB, read by a pool
  of ``readers`` threads (default: 16 for one rank; 32 / TP, at least 4, per rank when ranks share the node) with
  ``os.preadv`` into a ring of buffers: pinned on CUDA, ordinary host memory on CPU. Ring and pool are set up
  before the timed load (``prepare``), as a server's loader would be, and serve both models.
  O_DIRECT (aligned) where it helps and works: ``direct="auto"`` uses it for a file mostly absent from the page
  cache when only this rank reads it (TP 1), and falls back to buffered reads where the file system refuses
  it (EINVAL). A warm page cache is read buffered: O_DIRECT would bypass it and go to storage.
- Each request's bytes are copied to the device with ``non_blocking`` copies on a side CUDA stream, issued under
  one lock so each copy's timing events bracket only that copy; an event per buffer lets a buffer be reused only
  after its copies finished, so the reads of the next chunks overlap the copies of the previous ones.
- Bytes land directly in the parameter (raw bytes, so the load is bit-identical), or in a device staging buffer
  that is then reinterpreted as the tensor's dtype and shape and narrowed into the parameter.
"""

from __future__ import annotations

import errno
import math
import os
import queue
import threading
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ckptprof.checkpoint.header import ShardHeader, read_header
from ckptprof.checkpoint.tp_rules import TPSlice
from ckptprof.loader.plan import ModelPlan, ReplayPlan, ShardPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, Strategy, nonresident
from ckptprof.session import ShardTiming

# Reader counts chosen on the H200 (reports/h200/2026-11-30b-h200x2-strategies): one rank alone gains nothing past
# 16; with several ranks, more readers per rank scatter the reads and lose time cold.
DEFAULT_READERS = 16
NODE_READERS = 32  # with several ranks, readers per rank = this / ranks, at least MIN_RANK_READERS
MIN_RANK_READERS = 4


def default_readers(tp: int) -> int:
    """Reader threads per rank when not given: many for one rank, fewer per rank when ranks share the node's disk."""
    return DEFAULT_READERS if tp <= 1 else max(MIN_RANK_READERS, NODE_READERS // tp)


DEFAULT_CHUNK_MIB = 64
ALIGN = (
    4096  # O_DIRECT alignment of offsets, lengths and buffer addresses (the page size covers every device)
)
MERGE_GAP = 64 * 1024  # neighbouring ranges closer than this are read as one (a syscall costs more)
ROW_READ_MIN_SKIP = 1024 * 1024  # read a row-parallel slice row by row when each row skips at least this
EXTRA_BUFFERS = 4  # buffers beyond one per reader: copies in flight while every reader reads
DIRECT_MODES = ("auto", "always", "never")


@dataclass
class _Tensor:
    """One parameter being assembled from pieces: directly in its bytes, or in a device staging buffer."""

    role: str
    name: str
    param_bytes: torch.Tensor  # flat uint8 view of the parameter
    pieces_left: int = 0
    staged: bool = False  # whole rows read: reinterpret and narrow on the device once every piece arrived
    nbytes: int = 0  # staging size (the stored tensor's bytes)
    dtype: torch.dtype = torch.uint8
    shape: tuple[int, ...] = ()
    staging: torch.Tensor | None = None

    def dest(self, device: torch.device) -> torch.Tensor:
        if not self.staged:
            return self.param_bytes
        if self.staging is None:  # allocated at the first piece, dropped after the narrow: bounded memory
            self.staging = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        return self.staging


@dataclass
class _Piece:
    offset: int  # absolute file offset
    nbytes: int
    tensor: _Tensor
    dest_offset: int  # into the tensor's destination bytes


@dataclass
class _ShardInFlight:
    shard: ShardPlan
    timing: ShardTiming
    direct: bool
    rec: Recorder
    requests_left: int = 0
    fds: list[int] = field(default_factory=list)  # [current, previous...]: closed when the file is done
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Request:
    file: _ShardInFlight
    offset: int
    length: int
    pieces: list[_Piece]


class _Ring:
    """Host buffers handed out in turn; a buffer comes back only once the copies from it have finished."""

    def __init__(self, count: int, size: int, pinned: bool) -> None:
        self.count = count
        self.size = size
        self.pinned = pinned
        self._free: queue.Queue[int] = queue.Queue()
        self._buffers: list[torch.Tensor] = []
        self._events: list[Any] = []
        self._lock = threading.Lock()

    def fill(self) -> None:
        """Allocate every buffer now (pinning takes time: done before the timed load where possible)."""
        with self._lock:
            while len(self._buffers) < self.count:
                # A pre-allocated buffer is free until a reader takes it. (Without this, a filled ring - the
                # pinned, CUDA case - handed out nothing: every reader waited on an empty free list for good.)
                self._free.put(self._add())

    def _add(self) -> int:
        buf = torch.empty(self.size, dtype=torch.uint8, pin_memory=self.pinned)
        if not self.pinned:
            # Fresh host memory faults a page at a time on its first write; pinned memory is already resident.
            # Touch it here so a ring filled before the load does not page-fault inside the timed reads.
            buf.zero_()
        self._buffers.append(buf)
        self._events.append(None)
        return len(self._buffers) - 1

    def acquire(self) -> tuple[int, torch.Tensor]:
        try:
            idx = self._free.get_nowait()
        except queue.Empty:
            with self._lock:
                idx = self._add() if len(self._buffers) < self.count else -1
            if idx < 0:
                idx = self._free.get()
        event = self._events[idx]
        if event is not None:
            event.synchronize()  # the previous copies out of this buffer must be done before it is overwritten
            self._events[idx] = None
        return idx, self._buffers[idx]

    def release(self, idx: int, event: Any) -> None:
        self._events[idx] = event
        self._free.put(idx)


class Pipelined(Strategy):
    name = "pipelined"
    flags = "not an SGLang flag: what a pinned, pipelined loader reaches (fastsafetensors-like)"

    def __init__(
        self,
        readers: int | None = None,
        chunk_mib: int = DEFAULT_CHUNK_MIB,
        direct: str = "auto",
        row_read_min_skip: int = ROW_READ_MIN_SKIP,
    ) -> None:
        if (readers is not None and readers < 1) or chunk_mib < 1:
            raise ValueError("readers and chunk_mib must be at least 1")
        if direct not in DIRECT_MODES:
            raise ValueError(f"direct must be one of {', '.join(DIRECT_MODES)}, got {direct!r}")
        self.readers = readers
        # A buffer is exactly chunk_mib (the pinned allocator rounds sizes up to a power of two); a request leaves
        # room in it for O_DIRECT's alignment: an aligned start inside the buffer and both ends rounded out.
        self.buffer_bytes = chunk_mib * 1024 * 1024
        self.chunk = self.buffer_bytes - 3 * ALIGN
        self.direct = direct
        self.row_read_min_skip = row_read_min_skip
        self._ring: _Ring | None = None
        self._stream: Any = None
        self._issue = threading.Lock()
        self._work: queue.Queue[_Request | None] = queue.Queue()
        self._threads: list[threading.Thread] = []

    # -- set-up ---------------------------------------------------------------------------------------------------
    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """Set up before the timed load, as a server would: allocate (pin, on CUDA) the ring, sized to what the rank
        can have in flight, and start the reader threads (each binds its CUDA device and stream once)."""
        needed = sum(s.bytes for m in plan.models for s in m.shards)
        ring = self._ring_for(ctx, needed)
        # Failing here would leave this rank outside the start barrier, the others waiting for it: allocate what
        # fits now, the rest lazily inside the load (where a real shortage fails the load itself).
        with suppress(RuntimeError, MemoryError):
            ring.fill()
        with suppress(RuntimeError):  # no threads to spare: they start with the load instead
            self._start_readers(ctx, ring)

    def _start_readers(self, ctx: LoadContext, ring: _Ring) -> None:
        """The reader pool, once per replay (target and draft share it); returns when every reader is set up.

        Started inside the load, new threads binding CUDA held the first files' planning back (reports/h200/
        2026-11-30c-h200x2-run) - set-up cost that a server's long-lived loader pays once, not per load.
        """
        if any(t.is_alive() for t in self._threads):
            return
        readers = self._readers(ctx)
        ready = threading.Barrier(readers + 1)
        self._threads = [
            threading.Thread(
                target=self._reader, args=(ctx, ring, ready), name=f"ckptprof-reader{i}", daemon=True
            )
            for i in range(readers)
        ]
        for t in self._threads:
            t.start()
        with suppress(threading.BrokenBarrierError):
            ready.wait(timeout=30)

    def _stop_readers(self) -> None:
        for _ in self._threads:
            self._work.put(None)
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []

    def _readers(self, ctx: LoadContext) -> int:
        return self.readers if self.readers is not None else default_readers(ctx.tp)

    def _ring_for(self, ctx: LoadContext, needed: int) -> _Ring:
        if self._ring is None:
            count = max(2, min(self._readers(ctx) + EXTRA_BUFFERS, math.ceil(needed / self.chunk) + 1))
            self._ring = _Ring(count, self.buffer_bytes, pinned=ctx.device.type == "cuda")
        if ctx.device.type == "cuda" and self._stream is None:
            self._stream = torch.cuda.Stream(device=ctx.device)
        return self._ring

    def close(self) -> None:
        self._stop_readers()
        self._ring = None
        self._stream = None

    # -- the load -------------------------------------------------------------------------------------------------
    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        ring = self._ring_for(ctx, model.total_bytes)
        self._start_readers(ctx, ring)  # already running when prepare() ran
        threads = self._threads
        files: list[_ShardInFlight] = []
        try:
            for shard in model.shards:
                files.append(self._plan_file(ctx, model.role, shard, self._work, rec))
        finally:
            # Close in file order as each completes, so progress and partial results flow while later files load.
            for f in files:
                # Never wait on readers that are gone: a reader that died outside its per-request error handling
                # would otherwise leave this rank waiting forever.
                while not f.done.wait(0.5):
                    if not any(t.is_alive() for t in threads):
                        with f.lock:
                            f.error = f.error or RuntimeError(
                                f"every reader thread exited before {f.shard.name} was fully read"
                            )
                        break
                self._close_fds(f)
                rec.close_shard(f.timing, f.error)
            if self._stream is not None:
                self._stream.synchronize()  # the last staged narrows: parameters complete before we return

    def _plan_file(
        self, ctx: LoadContext, role: str, shard: ShardPlan, work: queue.Queue[_Request | None], rec: Recorder
    ) -> _ShardInFlight:
        """Read the header, turn the rank's tensors into merged read requests, queue them."""
        missing = nonresident(shard.path, shard.bytes)
        timing = rec.open_shard(Path(shard.path).name, nonresident_bytes=missing)
        f = _ShardInFlight(shard=shard, timing=timing, direct=False, rec=rec)
        try:
            if shard.error is not None:
                raise UnreadableShard(shard.error)
            with rec.read(0, shard=timing):
                header = read_header(shard.path)
            with rec.deserialize(shard=timing):
                pieces = self._pieces(ctx, role, header)
                requests = self._requests(f, pieces)
            f.direct = self._want_direct(ctx, shard, missing)
            f.fds.append(self._open(shard.path, f))
        except Exception as exc:
            f.error = exc
            f.done.set()
            return f
        f.requests_left = len(requests)
        if not requests:
            f.done.set()
        for r in requests:
            work.put(r)
        return f

    def _want_direct(self, ctx: LoadContext, shard: ShardPlan, missing: int) -> bool:
        if self.direct == "never" or not hasattr(os, "O_DIRECT"):
            return False
        if self.direct == "always":
            return True
        # Pages another rank also needs are better read once through the page cache; a cached file buffered.
        return ctx.tp == 1 and missing > shard.bytes // 2

    @staticmethod
    def _open(path: str, f: _ShardInFlight) -> int:
        if f.direct:
            try:
                return os.open(path, os.O_RDONLY | os.O_DIRECT)
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # tmpfs and some FUSE file systems refuse O_DIRECT
                    raise
                f.direct = False
        return os.open(path, os.O_RDONLY)

    @staticmethod
    def _close_fds(f: _ShardInFlight) -> None:
        for fd in f.fds:
            with suppress(OSError):
                os.close(fd)
        f.fds.clear()

    # -- what to read ---------------------------------------------------------------------------------------------
    def _pieces(self, ctx: LoadContext, role: str, header: ShardHeader) -> list[_Piece]:
        pieces: list[_Piece] = []
        for name, entry in header.tensors.items():
            param = ctx.params.get((role, name))
            sl = ctx.slices.get((role, name))
            if param is None or sl is None or sl.skipped or entry.nbytes == 0:
                continue  # another rank's expert, an unknown dtype, or nothing to read
            begin, _ = header.absolute_range(name)
            job = _Tensor(role=role, name=name, param_bytes=param.reshape(-1).view(torch.uint8))
            if sl.dim is None:
                mine = [_Piece(begin, entry.nbytes, job, 0)]
            else:
                mine = self._slice_pieces(job, begin, entry.shape, sl, param, self.row_read_min_skip)
            job.pieces_left = len(mine)
            pieces.extend(mine)
        return self._split(pieces)

    @staticmethod
    def _slice_pieces(
        job: _Tensor,
        begin: int,
        shape: tuple[int, ...],
        sl: TPSlice,
        param: torch.Tensor,
        min_skip: int,
    ) -> list[_Piece]:
        assert sl.dim is not None
        dim, start, length = sl.dim, sl.start, sl.length
        if length == 0:
            return []  # an uneven split left this rank nothing of this tensor
        item = param.element_size()
        outer = math.prod(shape[:dim])
        inner = math.prod(shape[dim + 1 :]) * item  # bytes of one index along dim
        size = shape[dim]
        if outer == 1:  # column-parallel (or leading dims of 1): one contiguous range
            return [_Piece(begin + start * inner, length * inner, job, 0)]
        if (size - length) * inner >= min_skip:
            # Each row skips enough to be worth its own read: one range per row, straight into the parameter.
            stride = param.shape[dim] * inner
            return [
                _Piece(begin + (o * size + start) * inner, length * inner, job, o * stride)
                for o in range(outer)
            ]
        # Whole rows: read the full tensor, narrow on the device.
        job.staged = True
        job.nbytes = outer * size * inner
        job.dtype = param.dtype
        job.shape = shape
        return [_Piece(begin, job.nbytes, job, 0)]

    def _split(self, pieces: list[_Piece]) -> list[_Piece]:
        """No piece larger than a buffer's chunk."""
        out: list[_Piece] = []
        for p in pieces:
            if p.nbytes <= self.chunk:
                out.append(p)
                continue
            n = math.ceil(p.nbytes / self.chunk)
            p.tensor.pieces_left += n - 1
            for i in range(n):
                off = i * self.chunk
                out.append(
                    _Piece(p.offset + off, min(self.chunk, p.nbytes - off), p.tensor, p.dest_offset + off)
                )
        return out

    def _requests(self, f: _ShardInFlight, pieces: list[_Piece]) -> list[_Request]:
        """Merge ranges in file order into requests of at most one chunk."""
        requests: list[_Request] = []
        for p in sorted(pieces, key=lambda p: p.offset):
            last = requests[-1] if requests else None
            end = p.offset + p.nbytes
            if (
                last is not None
                and p.offset - (last.offset + last.length) <= MERGE_GAP
                and end - last.offset <= self.chunk
            ):
                last.length = max(last.length, end - last.offset)
                last.pieces.append(p)
            else:
                requests.append(_Request(file=f, offset=p.offset, length=p.nbytes, pieces=[p]))
        return requests

    # -- readers --------------------------------------------------------------------------------------------------
    def _reader(self, ctx: LoadContext, ring: _Ring, ready: threading.Barrier) -> None:
        try:
            if ctx.device.type == "cuda":
                # The current device is per thread (a new thread starts on cuda:0); the thread's CUDA state is made
                # here, before the timed load.
                torch.cuda.set_device(ctx.device)
                torch.cuda.Event().record(self._stream)
        finally:
            with suppress(threading.BrokenBarrierError):
                ready.wait(timeout=30)
        while True:
            req = self._work.get()
            if req is None:
                return
            f = req.file
            try:
                if f.error is None:
                    idx, buf = ring.acquire()
                    event = None
                    try:
                        data = self._read(req, buf, f.rec)
                        event = self._copy(ctx, req, data, f.rec)
                    finally:
                        ring.release(idx, event)
            except Exception as exc:
                with f.lock:
                    f.error = f.error or exc
            finally:
                with f.lock:
                    f.requests_left -= 1
                    finished = f.requests_left == 0
                if finished:
                    f.done.set()

    def _read(self, req: _Request, buf: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """The request's bytes, read into ``buf``; returns the uint8 view holding exactly them."""
        f = req.file
        with rec.read(req.length, shard=f.timing):
            while True:
                direct = f.direct
                fd = f.fds[0]
                try:
                    return self._pread(fd, direct, req, buf)
                except OSError as exc:
                    if not (direct and exc.errno == errno.EINVAL):
                        raise
                with f.lock:  # O_DIRECT refused at read time: this file goes buffered from now on
                    if f.direct:
                        f.direct = False
                        f.fds.insert(0, os.open(f.shard.path, os.O_RDONLY))

    @staticmethod
    def _pread(fd: int, direct: bool, req: _Request, buf: torch.Tensor) -> torch.Tensor:
        host = buf.numpy()
        base = (-buf.data_ptr()) % ALIGN if direct else 0
        start = req.offset - req.offset % ALIGN if direct else req.offset
        stop = req.offset + req.length
        if direct:
            stop = -(-stop // ALIGN) * ALIGN
        got = 0
        want = stop - start
        while got < want:
            n = os.preadv(fd, [host[base + got : base + want].data], start + got)
            if n <= 0:
                break  # end of file (a direct read rounded past it)
            got += n
            if direct and n % ALIGN:
                break  # a short direct read only happens at the end of the file
        lead = req.offset - start
        if got < lead + req.length:
            raise OSError(errno.EIO, f"short read: {got - lead} of {req.length} bytes at offset {req.offset}")
        return buf[base + lead : base + lead + req.length]

    def _copy(self, ctx: LoadContext, req: _Request, data: torch.Tensor, rec: Recorder) -> Any:
        """Issue the request's copies (and any narrows they complete); returns the buffer's reuse event."""
        timing = req.file.timing
        with self._issue, self._on_stream():
            finished: list[_Tensor] = []
            with rec.h2d(sum(p.nbytes for p in req.pieces), shard=timing):
                for p in req.pieces:
                    dest = p.tensor.dest(ctx.device)
                    src = data[p.offset - req.offset : p.offset - req.offset + p.nbytes]
                    dest[p.dest_offset : p.dest_offset + p.nbytes].copy_(src, non_blocking=True)
                    p.tensor.pieces_left -= 1
                    if p.tensor.pieces_left == 0:
                        finished.append(p.tensor)
            event = None
            if self._stream is not None:
                event = torch.cuda.Event()
                event.record(self._stream)
            for job in finished:
                if job.staged:
                    self._narrow(ctx, job, rec, timing)
            for _ in finished:
                rec.tensor_done(shard=timing)
        return event

    def _narrow(self, ctx: LoadContext, job: _Tensor, rec: Recorder, timing: ShardTiming) -> None:
        """Whole rows are on the device: view them as the tensor, copy this rank's slice into the parameter."""
        assert job.staging is not None
        full = job.staging.view(job.dtype).view(job.shape)
        src = ctx.narrow(job.role, job.name, full)
        if src is not None:
            with rec.h2d(0, shard=timing):  # on-device work on the copy stream: its time is the stream's
                ctx.copy(job.role, job.name, src)
        job.staging = None

    def _on_stream(self) -> Any:
        """Copies go to the side stream on CUDA; on CPU they are synchronous host copies."""
        return nullcontext() if self._stream is None else torch.cuda.stream(self._stream)
