"""Page-cache residency of every shard of the checkpoints a server loads, sampled while it loads.

Each shard is opened once, read-only, and asked through that descriptor (checkpoint.fs.resident_bytes_fd:
cachestat, else mincore): opening a file again and again would cost a path walk per sample, and on a FUSE mount
without kernel_cache every open drops the file's cached pages - watching would then undo the server's reads.
Only changes are kept, so a shard that was read once costs two points.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.discovery import discover
from ckptprof.errors import CkptprofError


@dataclass
class ShardTrack:
    file: str
    path: Path
    bytes: int
    resident_at_start: int = 0
    resident: int = 0
    first_change_s: float | None = None  # seconds after watch began when residency first grew
    full_s: float | None = None  # ... when it first reached the whole file
    points: list[tuple[float, int]] = field(default_factory=list)  # (seconds, resident bytes), on change

    @property
    def fraction(self) -> float:
        return self.resident / self.bytes if self.bytes else 1.0


@dataclass
class ModelTrack:
    role: str
    path: str
    flag: str
    fs_type: str = "unknown"
    shards: list[ShardTrack] = field(default_factory=list)
    problem: str | None = None  # why its shards are not followed (not a local directory, unreadable, ...)
    reliable: bool = True  # whether the kernel tells this user the truth about these files' page cache

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def resident_bytes(self) -> int:
        return sum(s.resident for s in self.shards)


class ResidencyTracker:
    """Opens the shards of each model and samples their residency; ``close()`` lets the files go."""

    def __init__(self) -> None:
        self.models: list[ModelTrack] = []
        self._fds: dict[Path, int] = {}

    def add_model(self, role: str, path: str, flag: str) -> ModelTrack:
        model = ModelTrack(role, path, flag)
        self.models.append(model)
        if not os.path.isdir(path) and not path.endswith(".safetensors"):
            model.problem = (
                f"{path}: not a local checkpoint directory (a hub id?); its shards are not followed"
            )
            return model
        try:
            ckpt = discover(path)
        except CkptprofError as exc:
            model.problem = str(exc)
            return model
        model.fs_type = fs.fs_type(ckpt.path)
        for file in ckpt.files:
            try:
                fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError as exc:
                model.problem = f"{file}: cannot open ({exc.strerror})"
                continue
            self._fds[file] = fd
            model.shards.append(ShardTrack(file.name, file, os.fstat(fd).st_size))
        model.reliable = all(fs.residency_reliable(s.path) for s in model.shards)
        return model

    def sample(self, elapsed_s: float, first: bool = False) -> None:
        for model in self.models:
            for shard in model.shards:
                fd = self._fds.get(shard.path)
                if fd is None:
                    continue
                try:
                    now = fs.resident_bytes_fd(fd)
                except OSError:
                    continue
                if first:
                    shard.resident_at_start = now
                    shard.points.append((round(elapsed_s, 3), now))
                elif now != shard.resident:
                    shard.points.append((round(elapsed_s, 3), now))
                    if now > shard.resident and shard.first_change_s is None:
                        shard.first_change_s = round(elapsed_s, 3)
                # Full while watched: a shard already full at the start (and never dropped since) has no full time.
                if now >= shard.bytes and shard.full_s is None and not first and shard.resident < shard.bytes:
                    shard.full_s = round(elapsed_s, 3)
                shard.resident = now

    def close(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
