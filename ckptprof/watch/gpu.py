"""GPU memory per device while the server loads, read through NVML (``pynvml``, the nvidia-ml-py package that
torch's own NVML helpers such as ``torch.cuda.device_memory_used`` call): used and total bytes per device, and
the memory of each compute process NVML lists (a rank's own, where its pid is the one watch sees).

NVML reads the driver's bookkeeping: it opens no CUDA context. ``torch.cuda.mem_get_info`` is not used as a
fallback on purpose: it would create a CUDA context in watch's process on every GPU the server is loading onto
(hundreds of MB each), taking memory the server sizes its KV cache from. Where there is no NVML but a GPU, the
session says so in a note; where there is no GPU, it says "no GPU" (never zeros).

The provider is an interface (``GpuProvider``), so the tracker is tested with a fake one.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

NO_GPU = "no GPU"
NOT_SAMPLED = (
    "a GPU is present but its memory is not sampled: NVML's Python binding is not importable (pip install "
    "nvidia-ml-py); torch.cuda.mem_get_info is not used instead, since it would open a CUDA context (hundreds of MB) "
    "on every GPU the server is loading onto"
)


@dataclass(frozen=True)
class DeviceReading:
    index: int
    name: str
    used_bytes: int
    total_bytes: int
    processes: dict[int, int] = field(default_factory=dict)  # pid -> bytes, as NVML lists them


class GpuProvider(Protocol):
    source: str

    def read(self) -> list[DeviceReading]: ...

    def close(self) -> None: ...


class NvmlProvider:
    """NVML through pynvml; ``open()`` returns None where it cannot be used (not installed, no driver, no device)."""

    source = "nvml"

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles
        self._names: list[str] = []
        for h in handles:
            name = nvml.nvmlDeviceGetName(h)
            self._names.append(name.decode() if isinstance(name, bytes) else str(name))

    @classmethod
    def open(cls) -> NvmlProvider | None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None
        try:
            nvml.nvmlInit()
        except Exception:  # pynvml.NVMLError and its subclasses: no driver, no library
            return None
        try:
            count = int(nvml.nvmlDeviceGetCount())
            if count == 0:
                nvml.nvmlShutdown()
                return None
            return cls(nvml, [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)])
        except Exception:
            nvml.nvmlShutdown()
            return None

    def read(self) -> list[DeviceReading]:
        out = []
        for i, h in enumerate(self._handles):
            try:
                mem = self._nvml.nvmlDeviceGetMemoryInfo(h)
            except Exception:
                continue  # a device that stopped answering: the others still do
            procs: dict[int, int] = {}
            try:
                for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    used = getattr(p, "usedGpuMemory", None)
                    if isinstance(used, int):
                        procs[int(p.pid)] = used
            except Exception:
                pass  # per-process figures are a bonus: not every driver or container gives them
            out.append(DeviceReading(i, self._names[i], int(mem.used), int(mem.total), procs))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def gpu_present() -> bool:
    """An NVIDIA GPU on this host, by the driver's own files (no library needed to tell)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or any(Path("/dev").glob("nvidia[0-9]*"))


def choose() -> tuple[GpuProvider | None, str | None]:
    """(the provider, None), or (None, why there is none: "no GPU" or the note on an unsampled GPU)."""
    provider = NvmlProvider.open()
    if provider is not None:
        return provider, None
    return None, NOT_SAMPLED if gpu_present() else NO_GPU


@dataclass
class DeviceTrack:
    index: int
    name: str
    total_bytes: int
    used_at_start: int
    used_at_end: int
    peak_used_bytes: int
    points: list[tuple[float, int]]  # (seconds after watch began, used bytes), at each change


class GpuTracker:
    """Samples the provider at each of watch's samples; keeps per device its used bytes when they change, and per
    pid its peak (NVML's compute processes)."""

    def __init__(self, provider: GpuProvider | None, note: str | None) -> None:
        self.provider = provider
        self.note = note
        self.devices: dict[int, DeviceTrack] = {}
        self.peak_by_pid: dict[int, int] = {}

    def sample(self, t: float) -> None:
        if self.provider is None:
            return
        for d in self.provider.read():
            track = self.devices.get(d.index)
            if track is None:
                self.devices[d.index] = DeviceTrack(
                    d.index,
                    d.name,
                    d.total_bytes,
                    d.used_bytes,
                    d.used_bytes,
                    d.used_bytes,
                    [(t, d.used_bytes)],
                )
            else:
                if d.used_bytes != track.used_at_end:
                    track.points.append((t, d.used_bytes))
                track.used_at_end = d.used_bytes
                track.peak_used_bytes = max(track.peak_used_bytes, d.used_bytes)
            for pid, used in d.processes.items():
                self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), used)

    def close(self) -> None:
        if self.provider is not None:
            self.provider.close()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": None if self.provider is None else self.provider.source,
            "note": self.note,
            "devices": [
                {
                    "index": d.index,
                    "name": d.name,
                    "total_bytes": d.total_bytes,
                    "used_at_start": d.used_at_start,
                    "used_at_end": d.used_at_end,
                    "peak_used_bytes": d.peak_used_bytes,
                    "points": [[round(t, 3), b] for t, b in d.points],
                }
                for _, d in sorted(self.devices.items())
            ],
        }
