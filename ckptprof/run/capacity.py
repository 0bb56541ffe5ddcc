"""How many rank processes this machine can hold, checked before the first is spawned.

Each spawned rank is a Python process that imports torch and ckptprof's worker before it loads a byte; asked for
far more than the memory holds (`--tp 100000`), the kernel's OOM killer ends ckptprof itself, with no message
(issue #32 item 7). The figure per rank is measured; a tenth of the memory is kept free for everything else (the
parent, the page cache the load reads through), and the parameters each rank loads come on top, so a count this
check lets through can still be too many for a large checkpoint - but one it refuses could never have started.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from ckptprof.errors import UsageError
from ckptprof.units import human_bytes

# What a bare rank process holds before its load: a CPU rank, the worker and torch imported (its own memory, USS); a
# CUDA rank, mostly its CUDA context (the GPU figure: reports/h200/2026-11-30h-h200x2-peers). The parameters a rank
# loads come on top; the check only refuses counts whose bare processes cannot fit.
CPU_RANK_BYTES = 156 * 10**6
CUDA_RANK_BYTES = 640 * 10**6
# Tasks (processes and threads) a rank may run: the multithread loader's 8 threads, torch's intra-op pool (one per
# core), the queue's feeder; a pids limit counts every one of them.
LOADER_THREADS = 8
MEMORY_FOR_RANKS = 0.9


@dataclass(frozen=True)
class HostLimits:
    """What bounds the number of processes here; None where it is not known (or not limited)."""

    available_bytes: int | None
    tasks_left: int | None
    cores: int


def max_ranks(limits: HostLimits, per_rank_bytes: int) -> tuple[int | None, str]:
    """(the most ranks these limits hold, what binds), or (None, "") when nothing is known to bind."""
    bounds: list[tuple[int, str]] = []
    if limits.available_bytes is not None:
        bounds.append(
            (
                int(limits.available_bytes * MEMORY_FOR_RANKS) // per_rank_bytes,
                f"{human_bytes(limits.available_bytes)} of memory available, about {human_bytes(per_rank_bytes)} "
                "per rank before it loads anything",
            )
        )
    if limits.tasks_left is not None:
        per_rank = LOADER_THREADS + limits.cores + 2
        bounds.append(
            (limits.tasks_left // per_rank, f"{limits.tasks_left} more tasks allowed, ~{per_rank} per rank")
        )
    if not bounds:
        return None, ""
    return min(bounds)


def check_spawn(tp: int, devices: str | tuple[str, ...] | None, limits: HostLimits | None = None) -> None:
    """Refuse ``tp`` spawned ranks that this machine cannot hold, in one line (``UsageError``, exit 2)."""
    limits = limits or read_host_limits()
    # The larger figure first: a count that fits even as CUDA ranks needs no look at the devices (torch's import).
    most, why = max_ranks(limits, CUDA_RANK_BYTES)
    if most is None or tp <= most:
        return
    if not _uses_cuda(devices):
        most, why = max_ranks(limits, CPU_RANK_BYTES)
        if most is None or tp <= most:
            return
    raise UsageError(
        f"--tp {tp}: this machine can hold at most {most} rank process(es) ({why}); lower --tp, or launch the "
        "ranks across hosts with torchrun"
    )


def _uses_cuda(devices: str | tuple[str, ...] | None) -> bool:
    if isinstance(devices, tuple):
        return any(d.startswith("cuda") for d in devices)
    if devices is None:
        from ckptprof.devices import default_device_spec

        devices = default_device_spec()
    return devices.strip().lower() != "cpu"


def read_host_limits() -> HostLimits:
    """Memory available (the host's, or a cgroup's if that is less) and tasks left (cgroup pids, RLIMIT_NPROC)."""
    import psutil

    memory: list[int] = [int(psutil.virtual_memory().available)]
    tasks: list[int] = []
    for controller, folder in _cgroup_folders():
        for limit_name, used_name, into in (
            ("memory.max", "memory.current", memory),  # v2
            ("memory.limit_in_bytes", "memory.usage_in_bytes", memory),  # v1
            ("pids.max", "pids.current", tasks),
        ):
            if controller not in ("", limit_name.split(".")[0]):
                continue
            limit, used = _read_int(folder / limit_name), _read_int(folder / used_name)
            if limit is not None and used is not None:
                into.append(max(0, limit - used))
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.geteuid() != 0:  # root is not held to RLIMIT_NPROC
        tasks.append(max(0, soft - len(psutil.pids())))
    return HostLimits(min(memory), min(tasks) if tasks else None, os.cpu_count() or 1)


def _cgroup_folders(
    proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> list[tuple[str, Path]]:
    """(controller, folder) for this process's cgroups and their parents, where a limit may be set at any level:
    v2's one hierarchy (controller "") and v1's memory and pids hierarchies."""
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return []
    found: list[tuple[str, Path]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            if controller not in ("", "memory", "pids"):
                continue
            base = root / controller if controller else root
            folder = base / path.strip().lstrip("/")
            found += [(controller, p) for p in (folder, *folder.parents) if p.is_relative_to(base)]
    return found


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit
