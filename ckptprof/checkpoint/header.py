"""A validating reader for safetensors headers.

It reads the 8-byte length and the JSON header only - never a tensor byte - and checks everything a hostile
or truncated file could get wrong before anything downstream trusts an offset: a capped header length,
offsets inside the file, shape x dtype size equal to the byte span, no overlapping tensors, known dtypes.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.errors import CheckpointError

# safetensors itself refuses headers above 100 MB; a real header for a 1000-tensor shard is ~100 kB.
MAX_HEADER_BYTES = 100 * 1024 * 1024

# Bits per element of every dtype the safetensors format defines (sub-byte types included).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # relative to the start of the data section, as in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class ShardHeader:
    path: Path
    file_size: int
    header_len: int
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def data_start(self) -> int:
        return 8 + self.header_len

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    def absolute_range(self, name: str) -> tuple[int, int]:
        t = self.tensors[name]
        return self.data_start + t.begin, self.data_start + t.end


def read_header(path: str | Path) -> ShardHeader:
    """Read and validate one shard's header. Raises CheckpointError naming the file and the problem."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            file_size = os.fstat(fh.fileno()).st_size
            if file_size < 8:
                raise CheckpointError(
                    path, f"truncated: {file_size} bytes, a safetensors file needs at least 8"
                )
            (header_len,) = struct.unpack("<Q", fh.read(8))
            if header_len > MAX_HEADER_BYTES:
                raise CheckpointError(
                    path,
                    f"header length {header_len} exceeds the {MAX_HEADER_BYTES}-byte cap (corrupt or hostile)",
                )
            if 8 + header_len > file_size:
                raise CheckpointError(
                    path,
                    f"truncated: header says {header_len} bytes but the file has {file_size - 8} after its length",
                )
            raw = fh.read(header_len)
    except CheckpointError:
        raise
    except IsADirectoryError:
        raise CheckpointError(path, "is a directory, not a safetensors file") from None
    except PermissionError:
        raise CheckpointError(path, "permission denied") from None
    except FileNotFoundError:
        raise CheckpointError(path, "no such file") from None
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    return parse_header_bytes(path, raw, file_size)


def parse_header_bytes(path: Path, raw: bytes, file_size: int) -> ShardHeader:
    """Validate a header's JSON against the file size. Split from I/O so it can be fuzzed directly."""
    header_len = len(raw)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(path, f"header is not valid UTF-8 JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(path, "header is not a JSON object")
    metadata = _parse_metadata(path, doc.pop("__metadata__", None))
    data_size = file_size - 8 - header_len
    tensors: dict[str, TensorEntry] = {}
    for name, spec in doc.items():
        tensors[name] = _parse_entry(path, name, spec, data_size)
    _check_overlaps(path, tensors)
    return ShardHeader(
        path=path, file_size=file_size, header_len=header_len, tensors=tensors, metadata=metadata
    )


def _parse_metadata(path: Path, meta: Any) -> dict[str, str]:
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise CheckpointError(path, "__metadata__ must map strings to strings")
    return dict(meta)


def _parse_entry(path: Path, name: str, spec: Any, data_size: int) -> TensorEntry:
    if not isinstance(spec, dict):
        raise CheckpointError(path, f"tensor {name!r}: entry is not an object")
    dtype = spec.get("dtype")
    shape = spec.get("shape")
    offsets = spec.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise CheckpointError(path, f"tensor {name!r}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_index(d) for d in shape):
        raise CheckpointError(path, f"tensor {name!r}: shape must be a list of non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_index(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise CheckpointError(
            path, f"tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end"
        )
    begin, end = offsets
    if end > data_size:
        raise CheckpointError(
            path,
            f"tensor {name!r}: data_offsets end {end} is past the end of the data ({data_size} bytes; truncated?)",
        )
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8 != 0 or bits // 8 != end - begin:
        raise CheckpointError(
            path,
            f"tensor {name!r}: shape {shape} x {dtype} is {bits / 8:g} bytes but data_offsets span {end - begin}",
        )
    return TensorEntry(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_overlaps(path: Path, tensors: dict[str, TensorEntry]) -> None:
    previous: TensorEntry | None = None
    for entry in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if entry.nbytes == 0:
            continue
        if previous is not None and entry.begin < previous.end:
            raise CheckpointError(path, f"tensors {previous.name!r} and {entry.name!r} overlap in the file")
        previous = entry
