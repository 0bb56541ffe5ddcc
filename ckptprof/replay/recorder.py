"""The recorder: the only place where the replay's time is measured.

Strategies call ``rec.shard(...)``, ``rec.deserialize()``, ``rec.read(n)`` and ``rec.h2d(n)`` around what they do
and never read a clock themselves. The clock, the kernel counters and the copy timer are injected, so the
attribution logic runs on CPU with a fake clock in tests, and on CUDA with events around each copy.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ckptprof.session import RankModel, ShardTiming


class Counters(Protocol):
    def major_faults(self) -> int: ...

    def storage_read_bytes(self) -> int: ...


class CopyTimer(Protocol):
    """Times copies into device memory. ``elapsed()`` waits for outstanding copies and returns seconds."""

    label: str

    def start(self) -> Any: ...

    def stop(self, token: Any) -> None: ...

    def elapsed(self) -> float: ...


class ProcessCounters:
    """Major faults and bytes fetched from storage by this process (the kernel's per-task io accounting)."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()

    def major_faults(self) -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_majflt

    def storage_read_bytes(self) -> int:
        try:
            return int(self._proc.io_counters().read_bytes)
        except (
            AttributeError,
            OSError,
        ):  # no /proc/self/io (some containers): report 0, noted by the analysis
            return 0


class HostCopyTimer:
    """On a machine without CUDA the 'device' copy is a host copy, timed with the wall clock (a stand-in)."""

    label = "host-copy stand-in"

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._total = 0.0

    def start(self) -> float:
        return self._clock()

    def stop(self, token: Any) -> None:
        self._total += self._clock() - float(token)

    def elapsed(self) -> float:
        total, self._total = self._total, 0.0
        return total


class CudaCopyTimer:
    """CUDA events around each copy: the time the copy engine/driver spent, not the host's view of it."""

    label = "cuda-events"

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._pairs: list[tuple[Any, Any]] = []

    def start(self) -> Any:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, token: Any) -> None:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        self._pairs.append((token, ev))

    def elapsed(self) -> float:
        if not self._pairs:
            return 0.0
        self._torch.cuda.synchronize(self._device)
        total_ms = sum(a.elapsed_time(b) for a, b in self._pairs)
        self._pairs.clear()
        return total_ms / 1e3


@dataclass
class _ShardState:
    timing: ShardTiming
    t0: float
    faults0: int
    storage0: int


@dataclass
class Recorder:
    """Accumulates per-shard phase times for one rank."""

    copy_timer: CopyTimer
    counters: Counters = field(default_factory=ProcessCounters)
    clock: Callable[[], float] = time.perf_counter
    on_shard_done: Callable[[str, ShardTiming], None] | None = None
    models: list[RankModel] = field(default_factory=list)
    _origin: float | None = None
    _model: RankModel | None = None
    _shard: _ShardState | None = None

    def start(self) -> None:
        """Mark the rank's replay start (after the barrier); timeline offsets are relative to it."""
        self._origin = self.clock()

    def _now(self) -> float:
        if self._origin is None:
            self._origin = self.clock()
        return self.clock() - self._origin

    @contextmanager
    def model(self, role: str) -> Iterator[RankModel]:
        rm = RankModel(role=role, start_s=self._now())
        self.models.append(rm)
        self._model = rm
        try:
            yield rm
        finally:
            rm.wall_s = self._now() - rm.start_s
            self._model = None

    @contextmanager
    def shard(self, file: str, nonresident_bytes: int = 0) -> Iterator[ShardTiming]:
        if self._model is None:
            raise RuntimeError("rec.shard() outside rec.model()")
        timing = ShardTiming(file=file, nonresident_bytes=nonresident_bytes, start_s=self._now())
        state = _ShardState(
            timing=timing,
            t0=self.clock(),
            faults0=self.counters.major_faults(),
            storage0=self.counters.storage_read_bytes(),
        )
        self._shard = state
        try:
            yield timing
        except Exception as exc:
            timing.status = "failed"
            timing.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            # Outstanding device copies belong to this shard: wait for them before closing its wall time.
            timing.h2d_s += self.copy_timer.elapsed()
            timing.wall_s = self.clock() - state.t0
            timing.major_faults = self.counters.major_faults() - state.faults0
            timing.storage_bytes = max(0, self.counters.storage_read_bytes() - state.storage0)
            self._model.shards.append(timing)
            self._shard = None
            if self.on_shard_done is not None:
                self.on_shard_done(self._model.role, timing)

    def _current(self) -> ShardTiming:
        if self._shard is None:
            raise RuntimeError("phase recorded outside rec.shard()")
        return self._shard.timing

    @contextmanager
    def deserialize(self) -> Iterator[None]:
        t = self._current()
        t0 = self.clock()
        try:
            yield
        finally:
            t.deserialize_s += self.clock() - t0

    @contextmanager
    def read(self, nbytes: int) -> Iterator[None]:
        """Bringing ``nbytes`` of tensor data into memory (page faults on mmap, or explicit reads)."""
        t = self._current()
        t0 = self.clock()
        try:
            yield
        finally:
            t.read_s += self.clock() - t0
            t.bytes += nbytes

    def tensor_done(self) -> None:
        self._current().tensors += 1

    @contextmanager
    def h2d(self, nbytes: int) -> Iterator[None]:
        t = self._current()
        token = self.copy_timer.start()
        try:
            yield
        finally:
            self.copy_timer.stop(token)
            t.h2d_bytes += nbytes


class WallOnlyRecorder(Recorder):
    """For the faithful pass: SGLang's exact sequence, only shard walls measured, no per-phase clock reads."""

    @contextmanager
    def deserialize(self) -> Iterator[None]:
        yield

    @contextmanager
    def read(self, nbytes: int) -> Iterator[None]:
        self._current().bytes += nbytes
        yield

    @contextmanager
    def h2d(self, nbytes: int) -> Iterator[None]:
        self._current().h2d_bytes += nbytes
        yield
