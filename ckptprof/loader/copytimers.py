"""Timers of the copies into device memory: CUDA events on a GPU, the wall clock for the host-copy stand-in."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class CopyTimer(Protocol):
    """Times copies into device memory.

    ``start()`` / ``stop(token)`` bracket one copy; ``stop`` returns a span. ``seconds(spans)`` waits for those
    copies and returns their summed seconds; ``durations(spans)`` each one's (what the recorder uses, per shard).
    """

    label: str

    def start(self) -> Any: ...

    def stop(self, token: Any) -> Any: ...

    def seconds(self, spans: list[Any]) -> float: ...

    def durations(self, spans: list[Any]) -> list[float]: ...


def durations_of(timer: Any, spans: list[Any]) -> list[float]:
    """Each copy's seconds; a timer without ``durations`` (a test's) gives their sum as one."""
    each = getattr(timer, "durations", None)
    return list(each(spans)) if each is not None else [float(timer.seconds(spans))]


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

    def durations(self, spans: list[Any]) -> list[float]:
        return [float(span) for span in spans]


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
        return sum(self.durations(spans))

    def durations(self, spans: list[Any]) -> list[float]:
        out = []
        for start, end in spans:
            end.synchronize()  # only this copy: other streams' work goes on
            out.append(start.elapsed_time(end) / 1e3)
        return out
