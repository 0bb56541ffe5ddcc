"""A validating reader for safetensors headers.

It reads the 8-byte length and the JSON header only - never a tensor byte - and checks everything a hostile
or truncated file could get wrong before anything downstream trusts an offset: a capped header length,
offsets inside the file, shape x dtype size equal to the byte span, no overlapping tensors, known dtypes.

This is the one validator both ``inspect`` and ``run`` use (``run`` plans its shards with it before
``safe_open`` sees them), so it applies safetensors' own rules (``safetensors/src/tensor.rs``,
``read_metadata`` / ``validate``): a header of at most 100,000,000 bytes, JSON without duplicate keys, no NaN
or Infinity and at most 127 levels deep (serde_json's recursion limit), sizes that fit in 64 bits, and tensors
that tile the data section exactly - sorted by offset, each begins where the previous one ends, the first at 0
and the last at the end of the file. A shard that passes here is one ``safe_open`` accepts, and the other way
round, with one exception on purpose: a key given twice is refused here everywhere, while safetensors refuses it
only inside a tensor's entry (``duplicate field``) and for ``__metadata__``, and for a tensor keeps the last one.
A special file (FIFO, socket, device) is refused by its ``stat`` before anything opens it: opening a FIFO blocks.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.errors import CheckpointError, os_problem

# safetensors itself refuses headers above 100,000,000 bytes (MAX_HEADER_SIZE in safetensors/src/tensor.rs, not
# 100 MiB); a real header for a 1000-tensor shard is ~100 kB.
MAX_HEADER_BYTES = 100_000_000
# serde_json, which parses the header inside safetensors, refuses JSON nested deeper than this (its recursion
# limit of 128 counts the levels it enters; 127 containers, the header object included, parse).
MAX_HEADER_DEPTH = 127
# safetensors computes element counts and byte sizes in usize (64 bits) with checked arithmetic.
_USIZE_MAX = 2**64 - 1

# Bits per element of every dtype the safetensors format defines (sub-byte types included): those safetensors'
# own parser accepts, no more (an unknown name is refused there too).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,  # safetensors >= 0.7 reads these two AMD formats too
    "F8_E5M2FNUZ": 8,
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


def special_file_problem(mode: int) -> str | None:
    """``"is a FIFO, not a regular file"`` (socket, device, directory ...) for a ``st_mode`` that is not a regular
    file's; None for a regular file. Check before opening: ``open()`` on a FIFO blocks until a writer comes."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    kind = next((name for test, name in kinds if test(mode)), "a special file")
    return f"is {kind}, not a regular file"


def open_regular(path: Path) -> int:
    """Open a file for reading only if it is a regular file; returns the descriptor.

    The kind is checked by name first, so a FIFO or a device is never opened. The open is non-blocking and the
    descriptor checked again, so a file swapped for a FIFO in between cannot hang the caller either (reads of a
    regular file ignore O_NONBLOCK). Raises CheckpointError for a special file, OSError for the rest.
    """
    problem = special_file_problem(os.stat(path).st_mode)
    if problem is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            problem = special_file_problem(os.fstat(fd).st_mode)
        except BaseException:
            os.close(fd)
            raise
        if problem is None:
            return fd
        os.close(fd)
    raise CheckpointError(path, problem)


def read_header(path: str | Path) -> ShardHeader:
    """Read and validate one shard's header. Raises CheckpointError naming the file and the problem."""
    path = Path(path)
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            file_size = os.fstat(fh.fileno()).st_size
            if file_size < 8:
                raise CheckpointError(
                    path, f"truncated: {file_size} bytes, a safetensors file needs at least 8"
                )
            prefix = fh.read(8)
            if len(prefix) != 8:  # shrunk since fstat
                raise CheckpointError(
                    path, f"truncated: {len(prefix)} bytes, a safetensors file needs at least 8"
                )
            (header_len,) = struct.unpack("<Q", prefix)
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
            if len(raw) != header_len:  # shrunk since fstat
                raise CheckpointError(path, f"truncated: header says {header_len} bytes, read {len(raw)}")
    except CheckpointError:
        raise
    except OSError as exc:  # a directory is refused by open_regular; kept for a race
        raise CheckpointError(path, os_problem(exc)) from None
    return parse_header_bytes(path, raw, file_size)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json ``object_pairs_hook``: a dict, or _DuplicateKey for a key given twice (json.loads keeps the last)."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_int(text: str) -> int | float:
    # serde reads "-0" (and any negative) as a float, which no usize field accepts: keep it out of the ints.
    return float(text) if text.startswith("-") else int(text)


_ENTRY_FIELDS = ("dtype", "shape", "data_offsets")


def _depth(doc: Any) -> int:
    """How many JSON containers deep ``doc`` nests (the outer one counts), without recursing."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_HEADER_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def load_json_header(path: Path, raw: bytes) -> dict[str, Any]:
    """The header's JSON, parsed as strictly as safetensors (serde_json) does; CheckpointError otherwise."""
    try:
        doc = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_unique_object,
            parse_constant=_no_constant,
            # Only a header that holds "-0" somewhere needs the (slower) per-integer hook.
            parse_int=_parse_int if b"-0" in raw else None,
        )
    except _DuplicateKey as exc:
        raise CheckpointError(
            path,
            f"header names {exc.key!r} twice (a duplicate JSON key: which entry a reader gets depends on its parser)",
        ) from None
    except RecursionError:
        raise CheckpointError(path, "header is not valid UTF-8 JSON (nested too deeply)") from None
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise CheckpointError(path, f"header is not valid UTF-8 JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(path, "header is not a JSON object")
    return doc


def parse_header_bytes(path: Path, raw: bytes, file_size: int) -> ShardHeader:
    """Validate a header's JSON against the file size. Split from I/O so it can be fuzzed directly."""
    header_len = len(raw)
    if header_len > MAX_HEADER_BYTES:
        raise CheckpointError(
            path, f"header length {header_len} exceeds the {MAX_HEADER_BYTES}-byte cap (corrupt or hostile)"
        )
    doc = load_json_header(path, raw)
    metadata = _parse_metadata(path, doc.pop("__metadata__", None))
    data_size = file_size - 8 - header_len
    tensors: dict[str, TensorEntry] = {}
    for name, spec in doc.items():
        tensors[name] = _parse_entry(path, name, spec, data_size)
    check_layout(path, tensors, data_size)
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
    if len(spec) > len(_ENTRY_FIELDS):
        # Fields safetensors ignores; the only place a header that is otherwise valid can nest (the header object,
        # the entry, then this value), so serde_json's depth limit is checked here, not by walking every entry.
        for key, value in spec.items():
            if (
                key not in _ENTRY_FIELDS
                and isinstance(value, (dict, list))
                and 2 + _depth(value) > MAX_HEADER_DEPTH
            ):
                raise CheckpointError(
                    path,
                    f"tensor {name!r}: field {key!r} nests deeper than {MAX_HEADER_DEPTH} JSON levels "
                    "(safetensors' parser refuses it)",
                )
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
    # As safetensors computes it: element count, then bits, in checked 64-bit arithmetic (a zero dimension
    # after two huge ones still overflows there).
    numel = 1
    for dim in shape:
        numel *= dim
        if numel > _USIZE_MAX:
            raise CheckpointError(path, f"tensor {name!r}: shape {shape} overflows a 64-bit element count")
    bits = numel * DTYPE_BITS[dtype]
    if bits > _USIZE_MAX:
        raise CheckpointError(path, f"tensor {name!r}: shape {shape} x {dtype} overflows a 64-bit bit count")
    if bits % 8 != 0 or bits // 8 != end - begin:
        raise CheckpointError(
            path,
            f"tensor {name!r}: shape {shape} x {dtype} is {bits / 8:g} bytes but data_offsets span {end - begin}",
        )
    return TensorEntry(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_layout(path: Path, tensors: dict[str, TensorEntry], data_size: int) -> None:
    """The tensors must tile the data section exactly, as safetensors' ``validate`` requires: in offset order,
    each begins where the previous one ends (the first at 0; an empty tensor too), and the last ends at the end
    of the file. So no overlap, no gap, no unclaimed bytes after the last tensor."""
    cursor = 0
    previous: TensorEntry | None = None
    for entry in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if entry.begin < cursor:
            other = f"{previous.name!r}" if previous is not None else "the previous tensor"
            raise CheckpointError(path, f"tensors {other} and {entry.name!r} overlap in the file")
        if entry.begin > cursor:
            raise CheckpointError(
                path,
                f"bytes {cursor}..{entry.begin} of the data section belong to no tensor (a gap before "
                f"{entry.name!r}); safetensors requires the tensors to cover the data exactly",
            )
        cursor = entry.end
        previous = entry
    if cursor != data_size:
        raise CheckpointError(
            path,
            f"the tensors cover {cursor} of the {data_size} data bytes: the last {data_size - cursor} belong to "
            "no tensor; safetensors requires the tensors to cover the data exactly",
        )
