"""The recorder: the only place where the replay's time is measured.

Strategies call ``rec.shard(...)``, ``rec.deserialize()``, ``rec.read(n)`` and ``rec.h2d(n)`` around what they do
and never read a clock themselves. The clock, the kernel counters and the copy timer are injected, so the
attribution logic runs on CPU with a fake clock in tests, and on CUDA with events around each copy.

Concurrent strategies (reader threads, background prefetchers) open shards explicitly with
``rec.open_shard(...)`` and record phases from any thread against them (``rec.read(n, shard=t)``); every update
is taken under one lock. A phase recorded from a thread that does not own the shard counts that thread's own
major faults and storage bytes (``RUSAGE_THREAD``, ``/proc/thread-self/io``), so concurrent shards do not take
each other's counters. Such a shard's phase seconds are what each phase took in its thread (they may add up to
more than its wall when phases overlap); its wall spans its first to its last event, and the part of it no thread
worked on it is its queued time (a pool thread opened it, then it waited for the rank's thread).

Every phase's interval is kept until its model ends, then the model gets wall-clock figures that count a second
two threads both spent once: each phase's busy time (what rates divide bytes by) and its wall cut into parts that
add up to it (``busy_s``, ``wall_parts_s``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ckptprof.intervals import Interval, split_wall, union_seconds
from ckptprof.loader.copytimers import CopyTimer, durations_of
from ckptprof.loader.counters import Counters, ProcessCounters
from ckptprof.loader.plan import UnreadableShard
from ckptprof.session import RankModel, ShardTiming


@dataclass
class Awaited:
    """Filled in by the caller of ``Recorder.read_awaited`` once it knows what it waited for."""

    shard: ShardTiming | None = None
    nbytes: int = 0


@dataclass(slots=True)
class _ShardState:
    timing: ShardTiming
    model: RankModel
    t0: float
    # The thread that opened the shard with ``with rec.shard()``: its counters are read at open and close and
    # cover all it did in between. None for a shard opened with ``open_shard``: every phase counts its own.
    owner: int | None
    faults0: int
    storage0: int
    # Threads inside ``use_shard(shard)``: their counters are read on entering and leaving the block instead of
    # around every phase (reading /proc/thread-self/io costs tens of microseconds, a tensor can take less).
    users: set[int] = field(default_factory=set)
    spans: list[Any] = field(default_factory=list)
    first: float | None = None  # clock at the start of the first phase
    last: float | None = None  # clock at the end of the last phase
    # (start, end, kind) of every phase, in the order recorded; an h2d one's end is stretched to its copy's own
    # time when the shard closes (a copy on a side stream ends after the host issued it).
    phases: list[tuple[float, float, str]] = field(default_factory=list)
    # Each thread's stretch of work on the shard (``use_shard`` blocks): its time between phases is work too.
    stretches: list[Interval] = field(default_factory=list)
    # The names of the threads that worked on it, in the order they joined (a dict as an ordered set; by name, as a
    # finished thread's id is given to the next one started).
    threads: dict[str, None] = field(default_factory=dict)


def _thread_name() -> str:
    return threading.current_thread().name


# One thread's stretch of work on a shard: (began, ended, thread name, major faults, storage bytes), the clock at
# each end and the thread's counters' moves between them (see Recorder.add_stretched_shard).
Stretch = tuple[float, float, str, int, int]


_PHASE_FIELDS = {"read": "read_s", "deserialize": "deserialize_s", "h2d": "h2d_s"}


@dataclass
class Recorder:
    """Accumulates per-shard phase times for one rank; safe to call from several threads."""

    # Whether phases are timed: a strategy may skip the per-tensor phase blocks when they are not (see add_counts).
    times_phases: ClassVar[bool] = True
    # Whether each model keeps the spans of its copies (copy_began / copy_ended): the faithful pass does, so the
    # kernel sampler can tell the ticks inside SGLang's copies from the rest.
    keeps_copy_spans: ClassVar[bool] = False

    copy_timer: CopyTimer
    counters: Counters = field(default_factory=ProcessCounters)
    clock: Callable[[], float] = time.perf_counter
    on_shard_done: Callable[[str, ShardTiming], None] | None = None
    # Several closed shards in one call, (role, shard) each, in the order they closed: where given, the faithful
    # recorder's deliverer hands over each batch with it instead of calling ``on_shard_done`` once per shard (a
    # rank then puts one message on the parent's queue per batch, not one per shard).
    on_shards_done: Callable[[list[tuple[str, ShardTiming]]], None] | None = None
    models: list[RankModel] = field(default_factory=list)
    _origin: float | None = None
    _model: RankModel | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _done_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _open: dict[int, _ShardState] = field(default_factory=dict, repr=False)
    # Per open model (id of its RankModel): its closed shards' phase intervals by kind.
    _intervals: dict[int, dict[str, list[Interval]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        """A subclass's own state (the dataclass's __init__ calls this)."""

    def start(self) -> None:
        """Mark the rank's replay start (after the barrier); timeline offsets are relative to it."""
        self._origin = self.clock()

    def _now(self) -> float:
        if self._origin is None:
            self._origin = self.clock()
        return self.clock() - self._origin

    def _offset(self, t: float) -> float:
        if self._origin is None:
            self._origin = t
        return t - self._origin

    @contextmanager
    def model(self, role: str, flush_at_end: bool = True) -> Iterator[RankModel]:
        """One model's load. ``flush_at_end`` False leaves shards still waiting for ``on_shard_done`` to be
        delivered after the caller's wall (``flush_deliveries``), in order with the next model's."""
        rm = RankModel(role=role, start_s=self._now(), copy_spans=[] if self.keeps_copy_spans else None)
        self.models.append(rm)
        self._model = rm
        intervals: dict[str, list[Interval]] = {kind: [] for kind in _PHASE_FIELDS}
        self._intervals[id(rm)] = intervals
        try:
            yield rm
        finally:
            rm.wall_s = self._now() - rm.start_s
            self._model = None
            if flush_at_end:
                self._models_end()
            with self._lock:
                self._intervals.pop(id(rm), None)
            if any(intervals.values()):
                _wall_clock_figures(rm, intervals, (self._origin or 0.0) + rm.start_s)

    # -- counters ----------------------------------------------------------------------------------------------
    def _thread_counts(self) -> tuple[int, int]:
        """The calling thread's (major faults, storage bytes); the process's where the counters lack per-thread."""
        both = getattr(self.counters, "thread_counts", None)
        if both is not None:
            faults_now, storage_now = both()
            return int(faults_now), int(storage_now)
        faults = getattr(self.counters, "thread_major_faults", None)
        storage = getattr(self.counters, "thread_storage_read_bytes", None)
        return (
            int(faults()) if faults is not None else self.counters.major_faults(),
            int(storage()) if storage is not None else self.counters.storage_read_bytes(),
        )

    def _process_counts(self) -> tuple[int, int]:
        return self.counters.major_faults(), self.counters.storage_read_bytes()

    # -- shards ------------------------------------------------------------------------------------------------
    def _open_state(self, file: str, nonresident_bytes: int, owner: int | None) -> _ShardState:
        if self._model is None:
            raise RuntimeError("a shard opened outside rec.model()")
        t0 = self.clock()
        faults0, storage0 = self._thread_counts() if owner is not None else (0, 0)
        timing = ShardTiming(file=file, nonresident_bytes=nonresident_bytes, start_s=self._offset(t0))
        state = _ShardState(
            timing=timing, model=self._model, t0=t0, owner=owner, faults0=faults0, storage0=storage0
        )
        if owner is not None:
            state.threads[_thread_name()] = None
        with self._lock:
            self._open[id(timing)] = state
        return state

    def _close_state(self, state: _ShardState, error: BaseException | str | None) -> None:
        timing = state.timing
        with self._lock:
            if self._open.pop(id(timing), None) is None:
                return  # closed already
            spans = list(state.spans)
        # Outstanding device copies belong to this shard: wait for them before closing its wall time.
        copies = durations_of(self.copy_timer, spans) if spans else []
        t1 = self.clock()
        counts = self._thread_counts() if state.owner is not None else None
        with self._lock:
            timing.h2d_s += sum(copies)
            phases = _stretched(state.phases, copies)
            if error is not None:
                _mark_failed(timing, error)
            if state.owner is not None or state.first is None or state.last is None:
                timing.wall_s = t1 - state.t0
                begin = state.t0
            else:
                # Phases from several threads: the shard lasted from its first to its last event.
                begin = state.first
                timing.start_s = self._offset(state.first)
                timing.wall_s = state.last - state.first
            if state.owner is not None:
                work = timing.wall_s  # one thread held it from open to close
            elif phases or state.stretches:
                end = begin + timing.wall_s
                work = union_seconds(
                    [(max(a, begin), min(b, end)) for a, b, _ in phases]
                    + [(max(a, begin), min(b, end)) for a, b in state.stretches]
                )
            else:
                work = timing.wall_s
            timing.work_s = min(work, timing.wall_s)
            timing.queued_s = timing.wall_s - timing.work_s
            timing.threads = list(state.threads)
            if counts is not None:
                timing.major_faults += counts[0] - state.faults0
                timing.storage_bytes += max(0, counts[1] - state.storage0)
            state.model.shards.append(timing)
            intervals = self._intervals.get(id(state.model))
            if intervals is not None:
                for a, b, kind in phases:
                    intervals[kind].append((a, b))
        if self._delivers:
            self._deliver(state.model.role, timing)

    def add_stretched_shard(
        self,
        file: str,
        nonresident_bytes: int,
        stretches: list[Stretch],
        counts: tuple[int, int, int] = (0, 0, 0),
        error: BaseException | str | None = None,
    ) -> ShardTiming:
        """A shard recorded whole once its work is done, from each thread's stretch of work on it, in the order the
        threads took it up: (began, ended, thread name, major faults, storage bytes), the clock at each end and the
        counters' moves between. ``counts`` is (bytes, bytes copied to the device, tensors).

        For a pass that times no phases and whose threads keep their stretches themselves (the faithful
        multithreaded pass): neither its pool's tasks nor its copying thread takes a lock or a shard's state while
        they work, and the shard is booked with one locked append. Its figures are those that ``open_shard``, a
        ``use_shard`` block per stretch and ``close_shard`` give the same work: the wall from the first stretch's
        start to the last one's end, the work the union of the stretches, the rest queued."""
        model = self._model
        if model is None:
            raise RuntimeError("a shard recorded outside rec.model()")
        first = min(stretch[0] for stretch in stretches)
        last = max(stretch[1] for stretch in stretches)
        timing = ShardTiming(file=file, nonresident_bytes=nonresident_bytes, start_s=self._offset(first))
        timing.wall_s = last - first
        work = union_seconds([(stretch[0], stretch[1]) for stretch in stretches])
        timing.work_s = min(work, timing.wall_s)
        timing.queued_s = timing.wall_s - timing.work_s
        timing.threads = list(dict.fromkeys(stretch[2] for stretch in stretches))
        timing.major_faults = sum(stretch[3] for stretch in stretches)
        timing.storage_bytes = sum(max(0, stretch[4]) for stretch in stretches)
        timing.bytes, timing.h2d_bytes, timing.tensors = counts
        if error is not None:
            _mark_failed(timing, error)
        with self._lock:
            model.shards.append(timing)
        if self._delivers:
            self._deliver(model.role, timing)
        return timing

    def stretch_began(self) -> tuple[float, int, int]:
        """Where the calling thread's stretch of work on a shard begins: (clock, major faults, storage bytes), for
        ``stretch_ended``. A stretch a thread keeps itself, no lock taken (``add_stretched_shard``)."""
        faults, storage = self._thread_counts()
        return self.clock(), faults, storage

    def stretch_ended(self, began: tuple[float, int, int]) -> Stretch:
        """The calling thread's stretch since ``stretch_began``: its clock at each end, its name, its counters'
        moves."""
        ended = self.clock()
        faults, storage = self._thread_counts()
        return (began[0], ended, _thread_name(), faults - began[1], storage - began[2])

    @property
    def _delivers(self) -> bool:
        return self.on_shard_done is not None or self.on_shards_done is not None

    def _deliver(self, role: str, timing: ShardTiming) -> None:
        """Hand a closed shard over, here on the thread that closed it."""
        self._hand_over([(role, timing)])

    def _hand_over(self, batch: list[tuple[str, ShardTiming]]) -> None:
        """Closed shards to ``on_shards_done`` in one call where it is given, else to ``on_shard_done`` one by one."""
        with self._done_lock:  # callers' callbacks need not be thread-safe
            if self.on_shards_done is not None:
                self.on_shards_done(batch)
            elif self.on_shard_done is not None:
                for role, timing in batch:
                    self.on_shard_done(role, timing)

    def _models_end(self) -> None:
        """Called as a model ends, after its wall is taken: nothing to do unless deliveries wait (the faithful
        recorder's)."""

    def flush_deliveries(self) -> None:
        """Hand ``on_shard_done`` every closed shard still waiting (after models opened with ``flush_at_end``
        False): before the rank's result goes to the parent."""
        self._models_end()

    @contextmanager
    def shard(self, file: str, nonresident_bytes: int = 0) -> Iterator[ShardTiming]:
        """One shard processed by the calling thread, which becomes its current shard until the block ends."""
        state = self._open_state(file, nonresident_bytes, owner=threading.get_ident())
        previous = getattr(self._local, "state", None)
        self._local.state = state
        error: BaseException | None = None
        try:
            yield state.timing
        except Exception as exc:
            error = exc
            raise
        finally:
            self._local.state = previous
            self._close_state(state, error)

    def open_shard(self, file: str, nonresident_bytes: int = 0) -> ShardTiming:
        """A shard whose work is spread over threads: record phases with ``shard=``, then ``close_shard``."""
        return self._open_state(file, nonresident_bytes, owner=None).timing

    def close_shard(self, shard: ShardTiming, error: BaseException | str | None = None) -> None:
        """Finish a shard from ``open_shard`` (its copies are waited for); ``error`` marks it failed."""
        with self._lock:
            state = self._open.get(id(shard))
        if state is not None:
            self._close_state(state, error)

    @contextmanager
    def use_shard(self, shard: ShardTiming) -> Iterator[ShardTiming]:
        """Make an open shard the calling thread's current one, so phases without ``shard=`` land on it.

        Everything the thread does inside the block counts toward the shard's faults and storage bytes (read
        once on entry and once on exit): use it around a stretch of work one thread does for one shard.
        """
        state = self._state(shard)
        me = threading.get_ident()
        previous = getattr(self._local, "state", None)
        nested = me in state.users or state.owner == me
        c0 = None if nested else self._thread_counts()
        began = None if nested else self.clock()
        with self._lock:
            state.users.add(me)
            state.threads.setdefault(_thread_name(), None)
        self._local.state = state
        try:
            yield shard
        finally:
            self._local.state = previous
            if c0 is not None and began is not None:
                ended = self.clock()
                c1 = self._thread_counts()
                with self._lock:
                    state.users.discard(me)
                    state.timing.major_faults += c1[0] - c0[0]
                    state.timing.storage_bytes += max(0, c1[1] - c0[1])
                    # The stretch is the shard's time too: its wall spans it, its work includes it.
                    state.stretches.append((began, ended))
                    state.first = began if state.first is None else min(state.first, began)
                    state.last = ended if state.last is None else max(state.last, ended)

    def _state(self, shard: ShardTiming | None) -> _ShardState:
        if shard is None:
            state: _ShardState | None = getattr(self._local, "state", None)
            if state is None:
                raise RuntimeError("phase recorded outside rec.shard()")
            return state
        with self._lock:
            found = self._open.get(id(shard))
        if found is None:
            raise RuntimeError(f"phase recorded against shard {shard.file!r}, which is not open")
        return found

    # -- phases ------------------------------------------------------------------------------------------------
    @contextmanager
    def _phase(
        self, kind: str, nbytes: int, shard: ShardTiming | None, process: bool = False
    ) -> Iterator[None]:
        state = self._state(shard)
        # The owning thread's counters are taken at shard open/close; any other thread counts per phase.
        me = threading.get_ident()
        counted = process or (state.owner != me and me not in state.users)
        counts = self._process_counts if process else self._thread_counts
        c0 = counts() if counted else None
        marks = getattr(self.counters, "thread_io_marks", None) if kind == "deserialize" else None
        m0 = marks() if marks is not None else None
        token = self.copy_timer.start() if kind == "h2d" else None
        t0 = self.clock()
        try:
            yield
        finally:
            span = self.copy_timer.stop(token) if kind == "h2d" else None
            t1 = self.clock()
            c1 = counts() if c0 is not None else None
            if marks is not None and marks() != m0:
                # The block waited on storage (a major fault or a block read in this thread): on a cold cache
                # safe_open's first touch of the mapping, or get_tensor's, can pull megabytes of read-around in.
                # That is storage's time, not deserialisation's.
                kind = "read"
            self._add(state, kind, nbytes, t0, t1, span, c0, c1)

    def _add(
        self,
        state: _ShardState,
        kind: str,
        nbytes: int,
        t0: float,
        t1: float,
        span: Any,
        c0: tuple[int, int] | None,
        c1: tuple[int, int] | None,
    ) -> None:
        t = state.timing
        name = _thread_name()
        with self._lock:
            state.threads.setdefault(name, None)
            state.phases.append((t0, t1, kind))
            if kind == "h2d":
                state.spans.append(span)  # seconds come from the copy timer when the shard closes
                t.h2d_bytes += nbytes
            else:
                setattr(t, _PHASE_FIELDS[kind], getattr(t, _PHASE_FIELDS[kind]) + (t1 - t0))
                if kind == "read":
                    t.bytes += nbytes
            state.first = t0 if state.first is None else min(state.first, t0)
            state.last = t1 if state.last is None else max(state.last, t1)
            if c0 is not None and c1 is not None:
                t.major_faults += c1[0] - c0[0]
                t.storage_bytes += max(0, c1[1] - c0[1])

    @contextmanager
    def read_awaited(self) -> Iterator[Awaited]:
        """A read whose shard is known only when it ends (a streaming library's next tensor, read by its own
        threads): inside the block set ``shard`` and ``nbytes`` on the yielded object; the wait is booked there,
        with the whole process's faults and storage bytes. A block that sets no shard records nothing."""
        awaited = Awaited()
        c0 = self._process_counts()
        t0 = self.clock()
        try:
            yield awaited
        finally:
            t1 = self.clock()
            if awaited.shard is not None:
                self._add(
                    self._state(awaited.shard),
                    "read",
                    awaited.nbytes,
                    t0,
                    t1,
                    None,
                    c0,
                    self._process_counts(),
                )

    def process_storage_bytes(self) -> int:
        """The whole process's storage bytes so far (all its threads, a library's own included)."""
        return self._process_counts()[1]

    def process_major_faults(self) -> int:
        """The whole process's major faults so far."""
        return self._process_counts()[0]

    def add_process_counts(self, shard: ShardTiming, storage_bytes: int, major_faults: int) -> None:
        """Book on the open ``shard`` storage bytes and faults the process counted outside any timed block (an
        engine's own iterator reads on threads no recorder sees)."""
        with self._lock:
            state = self._open.get(id(shard))
            if state is not None:
                state.timing.storage_bytes += storage_bytes
                state.timing.major_faults += major_faults

    def settle_storage(self, shard: ShardTiming, since: int, timings: Iterable[ShardTiming]) -> None:
        """Book on the open ``shard`` the process's storage bytes since ``since`` (``process_storage_bytes``) that
        no timed block of ``timings`` counted: a library reads ahead on its own threads while the rank copies.
        Called as each shard closes, it keeps the rank's total exact; the split between shards is approximate."""
        residual = (self.process_storage_bytes() - since) - sum(t.storage_bytes for t in timings)
        if residual <= 0:
            return
        with self._lock:
            state = self._open.get(id(shard))
            if state is not None:
                state.timing.storage_bytes += residual

    def deserialize(self, shard: ShardTiming | None = None) -> AbstractContextManager[None]:
        """Opening a file, parsing its header, building tensor objects (no tensor bytes moved).

        A block in which the thread took a major fault or read blocks from storage is booked as ``read``: it waited
        on storage (counters that cannot say so, e.g. a test's fakes without ``thread_io_marks``, leave it here)."""
        return self._phase("deserialize", 0, shard)

    def read(
        self, nbytes: int, shard: ShardTiming | None = None, process: bool = False
    ) -> AbstractContextManager[None]:
        """Bringing ``nbytes`` of tensor data into memory (page faults on mmap, or explicit reads).

        ``process=True`` counts the whole process's faults and storage bytes during the phase: for a read done
        by a library's own threads while nothing else of the rank reads (fastsafetensors' I/O threads).
        """
        return self._phase("read", nbytes, shard, process)

    def h2d(self, nbytes: int, shard: ShardTiming | None = None) -> AbstractContextManager[None]:
        """Copying ``nbytes`` into this rank's parameters (timed by the copy timer, e.g. CUDA events)."""
        return self._phase("h2d", nbytes, shard)

    def copy_began(self) -> float:
        """The clock as a copy into a parameter starts, for ``copy_ended``: two clock reads and an append around a
        copy in a loop that otherwise records nothing (the faithful pass)."""
        return self.clock()

    def copy_ended(self, began: float) -> None:
        """Keep the span of a copy that began at ``began`` in the current model (when this recorder keeps them)."""
        model = self._model
        if model is not None and model.copy_spans is not None:
            model.copy_spans.append((self._offset(began), self._now()))

    def tensor_done(self, shard: ShardTiming | None = None) -> None:
        state = self._state(shard)
        with self._lock:
            state.timing.tensors += 1

    def add_counts(self, nbytes: int, h2d_bytes: int, tensors: int, shard: ShardTiming | None = None) -> None:
        """What ``read(nbytes)``, ``h2d(h2d_bytes)`` and ``tensors`` calls of ``tensor_done`` would have counted,
        in one call: for a loop that records no phases because none is timed (``times_phases`` False)."""
        state = self._state(shard)
        with self._lock:
            state.timing.bytes += nbytes
            state.timing.h2d_bytes += h2d_bytes
            state.timing.tensors += tensors


class WallOnlyRecorder(Recorder):
    """For the faithful pass: SGLang's exact sequence, only shard walls measured, no per-phase clock reads.

    Closed shards are handed over from a thread of the recorder's, in batches every ``DELIVER_EVERY_S`` (one
    ``on_shards_done`` call per batch where given), and the rest as the model ends (or, for a model opened with
    ``flush_at_end`` False, at ``flush_deliveries`` after the rank's wall: the worker's, so that a load shorter than
    the interval does not deliver its every shard inside its wall). A rank turns a batch into one message on the
    parent's queue, whose feeder thread wakes to pickle it. Both threads take the GIL from the loading thread while
    they work: on the loading thread, once per shard, that took a third of the faithful pass's excess over a plain
    loop; from a thread every 0.1 s, one message per shard, the pass was still 1.07-1.14x the plain loop warm at TP8
    on one H200, and 0.99x with no delivery inside the wall (reports/h200/2026-12-03-h200-faithful-overhead-batched).
    The parent still hears of every shard within the interval, a stalled rank's included, and of all of them before
    the rank's result.
    """

    times_phases: ClassVar[bool] = False
    keeps_copy_spans: ClassVar[bool] = True
    # How long a closed shard may wait for its delivery: short beside a hang timeout (tens of seconds) and fine for a
    # progress bar, long beside a warm load (a TP8 rank's 0.2-0.3 s is then delivered after its wall, a TP1 rank's
    # ~0.8 s in one batch inside it).
    DELIVER_EVERY_S: ClassVar[float] = 0.5

    def __post_init__(self) -> None:
        # A deque, not a list under a lock: the loading thread only appends (atomic), the deliverer only pops, so
        # closing a shard never waits for the deliverer, which holds the GIL for as long as its callbacks run (a
        # shared lock made the loading thread queue behind it: ~3 ms of a 64-shard load on the CPU).
        self._pending: deque[tuple[str, ShardTiming]] = deque()
        self._stop = threading.Event()
        self._deliverer: threading.Thread | None = None
        # Taken once per model, to start one deliverer however many threads close shards.
        self._starting = threading.Lock()

    def _deliver(self, role: str, timing: ShardTiming) -> None:
        self._pending.append((role, timing))
        if self._deliverer is not None:
            return
        with self._starting:
            if self._deliverer is None:
                self._stop.clear()
                self._deliverer = threading.Thread(
                    target=self._deliver_batches, name="ckptprof-shard-delivery", daemon=True
                )
                self._deliverer.start()

    def _deliver_batches(self) -> None:
        while True:
            stopping = self._stop.wait(self.DELIVER_EVERY_S)
            batch = []
            while self._pending:
                batch.append(self._pending.popleft())
            if batch:
                self._hand_over(batch)
            if stopping:
                return

    def _close_state(self, state: _ShardState, error: BaseException | str | None) -> None:
        """A shard one thread held from open to close (``rec.shard``) with no phase, copy or other thread's stretch
        recorded on it - the faithful single-thread loop's every shard - is closed with the figures the general
        close gives it (wall, work = wall, no queued time, its thread, its counters' deltas) in one locked step:
        no copy waits, interval lists or unions to build for nothing. Any other shard takes the general close."""
        if state.owner is None or state.phases or state.spans or state.stretches or len(state.threads) != 1:
            super()._close_state(state, error)
            return
        timing = state.timing
        t1 = self.clock()
        faults, storage = self._thread_counts()
        with self._lock:
            if self._open.pop(id(timing), None) is None:
                return  # closed already
            if error is not None:
                _mark_failed(timing, error)
            timing.wall_s = timing.work_s = t1 - state.t0
            timing.queued_s = 0.0
            timing.threads = list(state.threads)
            timing.major_faults += faults - state.faults0
            timing.storage_bytes += max(0, storage - state.storage0)
            state.model.shards.append(timing)
        if self._delivers:
            self._deliver(state.model.role, timing)

    def _models_end(self) -> None:
        """Deliver what is pending before the next model (or the rank's result): the parent's order holds."""
        with self._starting:
            deliverer, self._deliverer = self._deliverer, None
        if deliverer is not None:
            self._stop.set()
            deliverer.join()

    @contextmanager
    def read_awaited(self) -> Iterator[Awaited]:
        awaited = Awaited()
        yield awaited
        if awaited.shard is not None:
            state = self._state(awaited.shard)
            with self._lock:
                state.timing.bytes += awaited.nbytes

    @contextmanager
    def _phase(
        self, kind: str, nbytes: int, shard: ShardTiming | None, process: bool = False
    ) -> Iterator[None]:
        state = self._state(shard)
        with self._lock:
            if kind == "read":
                state.timing.bytes += nbytes
            elif kind == "h2d":
                state.timing.h2d_bytes += nbytes
        if kind != "h2d":
            yield
            return
        began = self.copy_began()
        try:
            yield
        finally:
            self.copy_ended(began)


def _mark_failed(timing: ShardTiming, error: BaseException | str) -> None:
    timing.status = "failed"
    timing.error = (
        error
        if isinstance(error, str)
        else str(error)
        if isinstance(error, UnreadableShard)
        else f"{type(error).__name__}: {error}"
    )


def shard_dict(timing: ShardTiming) -> dict[str, Any]:
    """``dataclasses.asdict(timing)`` for a rank's message to the parent, without its recursive deep copy: the
    fields are scalars but for the list of thread names, copied here. ~1 us against asdict's ~40 us on the 2-core
    VM, on the thread that delivers closed shards during the load (it holds the GIL the loading thread needs)."""
    fields = getattr(timing, "__dict__", None)
    if fields is None:  # a slotted ShardTiming: the general form
        return asdict(timing)
    out = dict(fields)
    if timing.threads is not None:
        out["threads"] = list(timing.threads)
    return out


def _stretched(phases: list[tuple[float, float, str]], copies: list[float]) -> list[tuple[float, float, str]]:
    """The phases with each h2d interval lasting at least its copy's own time (``copies``, in the order the copies
    were recorded): a copy issued on a side stream returns at once and runs on."""
    out = []
    copy = iter(copies)
    for a, b, kind in phases:
        if kind == "h2d":
            b = max(b, a + next(copy, 0.0))
        out.append((a, b, kind))
    return out


def _wall_clock_figures(rm: RankModel, intervals: dict[str, list[Interval]], start: float) -> None:
    """Set the model's per-phase busy time and its wall cut into parts, from its phases' intervals."""
    rm.busy_s = {kind: union_seconds(ivs) for kind, ivs in intervals.items()}
    rm.busy_s["any"] = union_seconds(iv for ivs in intervals.values() for iv in ivs)
    rm.wall_parts_s = split_wall(intervals, start, start + rm.wall_s)
