"""Timers of the copies into device memory: CUDA events on a GPU, the wall clock for the host-copy stand-in."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class CopyTimer(Protocol):
    """Times copies into device memory.

    ``start()`` / ``stop(token)`` bracket one copy; ``stop`` returns a span. ``seconds(spans)`` waits for those
    copies and returns their summed seconds (what the recorder uses, per shard).
    """

    label: str

    def start(self) -> Any: ...

    def stop(self, token: Any) -> Any: ...

    def seconds(self, spans: list[Any]) -> float: ...


class HostCopyTimer:
    """On a machine without CUDA the 'device' copy is a host copy, timed with the wall clock (a stand-in)."""

    label = "host-copy stand-in"

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock

    def start(self) -> float:
        return self._clock()

    def stop(self, token: Any) -> float:
        return self._clock() - float(token)

    def seconds(self, spans: list[Any]) -> float:
        return float(sum(spans))


class CudaCopyTimer:
    """CUDA events around each copy: the time the copy engine/driver spent, not the host's view of it.

    The events are recorded on the calling thread's current stream, so a copy issued on a side stream
    (``with torch.cuda.stream(s)``) is timed on that stream.
    """

    label = "cuda-events"

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self._device = device

    def start(self) -> Any:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, token: Any) -> tuple[Any, Any]:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return (token, ev)

    def seconds(self, spans: list[Any]) -> float:
        total_ms = 0.0
        for span in spans:
            start, end = span
            end.synchronize()  # only this copy: other streams' work goes on
            total_ms += start.elapsed_time(end)
        return total_ms / 1e3
