"""What a checkpoint holds, from its headers alone: shards, dtypes, largest tensors, index consistency."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.discovery import Checkpoint, discover
from ckptprof.checkpoint.header import ShardHeader, read_header
from ckptprof.errors import CheckpointError


@dataclass
class Inspection:
    checkpoint: Checkpoint
    headers: list[ShardHeader]
    errors: list[str] = field(default_factory=list)  # one line per unusable shard, naming the file
    fs_type: str = "unknown"
    resident_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(h.file_size for h in self.headers)

    def to_dict(self, largest: int = 10) -> dict[str, Any]:
        ckpt = self.checkpoint
        dtypes: Counter[str] = Counter()
        dtype_bytes: Counter[str] = Counter()
        tensors = []
        for h in self.headers:
            for t in h.tensors.values():
                dtypes[t.dtype] += 1
                dtype_bytes[t.dtype] += t.nbytes
                tensors.append((t.nbytes, t.name, t.dtype, list(t.shape), h.path.name))
        tensors.sort(key=lambda x: (-x[0], x[1]))
        index = _index_consistency(ckpt, self.headers)
        return {
            "path": str(ckpt.path),
            "format": ckpt.format,
            "fs_type": self.fs_type,
            "total_bytes": self.total_bytes,
            "tensor_bytes": sum(h.tensor_bytes for h in self.headers),
            "tensors": sum(len(h.tensors) for h in self.headers),
            "resident_bytes": self.resident_bytes,
            "resident_fraction": self.resident_bytes / self.total_bytes if self.total_bytes else 0.0,
            "shards": [
                {
                    "file": h.path.name,
                    "bytes": h.file_size,
                    "tensors": len(h.tensors),
                    "header_bytes": h.header_len,
                    "dtypes": sorted({t.dtype for t in h.tensors.values()}),
                }
                for h in self.headers
            ],
            "dtypes": {d: {"tensors": dtypes[d], "bytes": dtype_bytes[d]} for d in sorted(dtypes)},
            "largest_tensors": [
                {"name": n, "dtype": d, "shape": s, "bytes": b, "file": f}
                for b, n, d, s, f in tensors[:largest]
            ],
            "index": index,
            "errors": list(self.errors),
        }


def _index_consistency(ckpt: Checkpoint, headers: list[ShardHeader]) -> dict[str, Any]:
    if ckpt.index_path is None:
        return {"present": False}
    present: dict[str, str] = {}
    for h in headers:
        for name in h.tensors:
            present[name] = h.path.name
    read_files = {h.path.name for h in headers}
    absent = sorted(
        name for name, file in ckpt.weight_map.items() if file in read_files and present.get(name) != file
    )
    unindexed = sorted(name for name in present if name not in ckpt.weight_map)
    return {
        "present": True,
        "file": ckpt.index_path.name,
        "shards_missing": ckpt.missing_from_disk,
        "files_not_in_index": ckpt.not_in_index,
        "tensors_missing": absent,
        "tensors_not_in_index": unindexed,
        "consistent": not (ckpt.missing_from_disk or ckpt.not_in_index or absent or unindexed),
    }


def inspect_checkpoint(path: str | Path, order: str = "sorted", residency: bool = True) -> Inspection:
    """Read every shard header. Bad shards become error lines; the good ones are still reported."""
    ckpt = discover(path, order=order)
    headers: list[ShardHeader] = []
    errors = list(ckpt.problems)
    for name in ckpt.missing_from_disk:
        errors.append(f"{ckpt.path / name}: {ckpt.missing_reason()}")
    if ckpt.format != "safetensors":
        errors.append(
            f"{ckpt.path}: holds only .{ckpt.format} (pickle) weight files; ckptprof reads safetensors and never "
            "unpickles a checkpoint - convert it to safetensors first"
        )
    else:
        for f in ckpt.files:
            try:
                headers.append(read_header(f))
            except CheckpointError as exc:
                errors.append(str(exc))
    resident = 0
    if residency:
        for h in headers:
            with contextlib.suppress(OSError):
                resident += fs.resident_bytes(h.path)
    return Inspection(
        checkpoint=ckpt,
        headers=headers,
        errors=errors,
        fs_type=fs.fs_type(ckpt.path),
        resident_bytes=resident,
    )
