from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.checkpoint.header import DTYPE_BITS, MAX_HEADER_BYTES, parse_header_bytes, read_header
from ckptprof.errors import CheckpointError


def write(path: Path, header: dict[str, object], data: bytes, pad: bool = True) -> Path:
    raw = json.dumps(header).encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def test_reads_every_dtype_and_metadata(tmp_path: Path) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for i, (dtype, bits) in enumerate(sorted(DTYPE_BITS.items())):
        n = 8  # 8 elements is a whole number of bytes for every width, 4- and 6-bit included
        size = n * bits // 8
        header[f"t{i}"] = {"dtype": dtype, "shape": [2, 4], "data_offsets": [offset, offset + size]}
        offset += size
    h = read_header(write(tmp_path / "a.safetensors", header, b"\x01" * offset))
    assert h.metadata == {"format": "pt"}
    assert len(h.tensors) == len(DTYPE_BITS)
    assert h.tensors["t0"].shape == (2, 4)
    assert h.tensor_bytes == offset
    assert h.absolute_range("t0")[0] == 8 + h.header_len


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dtype": "F99", "shape": [2], "data_offsets": [0, 4]}, "unknown dtype"),
        ({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}, "data_offsets span 8"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}, "past the end"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "non-negative"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "begin <= end"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0]}, "data_offsets"),
        ("oops", "not an object"),
    ],
)
def test_rejects_bad_entries(tmp_path: Path, entry: object, message: str) -> None:
    path = write(tmp_path / "bad.safetensors", {"x": entry}, b"\0" * 8)
    with pytest.raises(CheckpointError) as info:
        read_header(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_rejects_overlapping_tensors(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]},
    }
    with pytest.raises(CheckpointError, match="overlap"):
        read_header(write(tmp_path / "o.safetensors", header, b"\0" * 16))


def test_huge_header_length_is_capped_before_any_allocation(tmp_path: Path) -> None:
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    with pytest.raises(CheckpointError, match="cap"):
        read_header(path)
    assert MAX_HEADER_BYTES < 2**63


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "truncated"),
        (b"\x01\x02", "truncated"),
        (struct.pack("<Q", 100) + b"{}", "truncated"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid UTF-8 JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    ],
)
def test_truncated_and_garbage_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "t.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        read_header(path)


def test_directory_and_missing_file(tmp_path: Path) -> None:
    d = tmp_path / "dir.safetensors"
    d.mkdir()
    with pytest.raises(CheckpointError, match="is a directory"):
        read_header(d)
    with pytest.raises(CheckpointError, match="no such file"):
        read_header(tmp_path / "nope.safetensors")


def test_matches_safetensors_own_writer(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    tensors = {"w": torch.randn(3, 5, dtype=torch.bfloat16), "b": torch.arange(7, dtype=torch.int64)}
    save_file(tensors, str(tmp_path / "m.safetensors"), metadata={"k": "v"})
    h = read_header(tmp_path / "m.safetensors")
    assert {n: (t.dtype, t.shape) for n, t in h.tensors.items()} == {
        "w": ("BF16", (3, 5)),
        "b": ("I64", (7,)),
    }


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512), st.integers(min_value=0, max_value=4096))
def test_arbitrary_header_bytes_raise_only_checkpoint_errors(raw: bytes, data_size: int) -> None:
    try:
        parse_header_bytes(Path("fuzz.safetensors"), raw, len(raw) + 8 + data_size)
    except CheckpointError as exc:
        assert "fuzz.safetensors" in str(exc)


def _raw_file(path: Path, header: str, data: bytes) -> Path:
    raw = header.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def _entry(begin: int, end: int, dtype: str = "U8", shape: list[int] | None = None) -> str:
    shape = [end - begin] if shape is None else shape
    return json.dumps({"dtype": dtype, "shape": shape, "data_offsets": [begin, end]})


def _obj(*items: tuple[str, str]) -> str:
    """A JSON object from (key, JSON text) pairs, as written: a key may come twice."""
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in items) + "}"


def _nested(depth: int) -> str:
    """A valid tensor entry whose extra field (which safetensors ignores) nests ``depth`` arrays deep."""
    arrays = "[" * depth + "]" * depth
    return _obj(("a", '{"dtype":"U8","shape":[8],"data_offsets":[0,8],"x":' + arrays + "}"))


# Headers that safetensors' own parser (safe_open) accepts or refuses: read_header must agree on every one, so
# `inspect` (which reads only read_header) and `run` (whose ranks safe_open each shard it planned with
# read_header) pass or fail the same shard. (header JSON, data bytes, safetensors accepts it)
AGREE = {
    "valid": (_obj(("a", _entry(0, 8))), 8, True),
    "empty": ("{}", 0, True),
    "metadata-only": ('{"__metadata__":{"k":"v"}}', 0, True),
    "metadata-null": (_obj(("__metadata__", "null"), ("a", _entry(0, 8))), 8, True),
    "padding-spaces": (_obj(("a", _entry(0, 8))) + "    ", 8, True),
    "leading-space": (" " + _obj(("a", _entry(0, 8))), 8, True),
    "unknown-entry-field": ('{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8],"x":1}}', 8, True),
    "empty-tensor-at-the-end": (_obj(("a", _entry(0, 8)), ("z", _entry(8, 8))), 8, True),
    "amd-fp8": (_obj(("a", _entry(0, 8, "F8_E4M3FNUZ", [8]))), 8, True),
    "field-nested-125-deep": (_nested(125), 8, True),
    # the data section must be covered exactly
    "trailing-data-bytes": (_obj(("a", _entry(0, 8))), 12, False),
    "data-but-no-tensors": ("{}", 4, False),
    "gap-between-tensors": (_obj(("a", _entry(0, 8)), ("b", _entry(12, 16))), 16, False),
    "gap-before-first": (_obj(("a", _entry(4, 12))), 12, False),
    "empty-tensor-inside-another": (_obj(("a", _entry(0, 8)), ("z", _entry(4, 4))), 8, False),
    "empty-tensor-past-the-end": (_obj(("a", _entry(0, 8)), ("z", _entry(9, 9))), 9, False),
    "overlap": (_obj(("a", _entry(0, 8)), ("b", _entry(4, 12))), 12, False),
    # duplicate keys (safetensors: a struct's field or __metadata__ given twice)
    "duplicate-field": ('{"a":{"dtype":"U8","dtype":"U8","shape":[8],"data_offsets":[0,8]}}', 8, False),
    "duplicate-metadata": (
        _obj(("__metadata__", "{}"), ("__metadata__", "{}"), ("a", _entry(0, 8))),
        8,
        False,
    ),
    "duplicate-tensor-differing": (_obj(("a", _entry(0, 8)), ("a", _entry(8, 16))), 16, False),
    # JSON serde refuses and Python's json accepted
    "negative-zero-dim": ('{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}', 0, False),
    "nan": (_obj(("a", _entry(0, 8)), ("b", "NaN")), 8, False),
    "field-nested-126-deep": (_nested(126), 8, False),
    "element-count-overflows-64-bits": (_obj(("a", _entry(0, 0, shape=[2**32, 2**32, 0]))), 0, False),
    "unknown-dtype": (_obj(("a", _entry(0, 8, "F8_E4M3FN", [8]))), 8, False),
}


@pytest.mark.parametrize("case", sorted(AGREE))
def test_validator_agrees_with_safetensors(tmp_path: Path, case: str) -> None:
    from safetensors import safe_open

    header, data_len, accepted = AGREE[case]
    path = _raw_file(tmp_path / "s.safetensors", header, b"\0" * data_len)
    try:
        with safe_open(str(path), framework="pt", device="cpu"):
            theirs = True
    except Exception:
        theirs = False
    assert theirs == accepted, "the case's expectation about safetensors is wrong"
    try:
        read_header(path)
        ours = True
    except CheckpointError as exc:
        assert str(path) in str(exc)
        ours = False
    assert ours == accepted


@pytest.mark.parametrize(
    ("header", "data_len", "message"),
    [
        (_obj(("a", _entry(0, 8))), 12, "the last 4 belong to no tensor"),
        (_obj(("a", _entry(0, 8)), ("b", _entry(12, 16))), 16, "bytes 8..12 of the data section"),
        (_obj(("a", _entry(0, 8)), ("a", _entry(0, 8))), 8, "names 'a' twice"),
        (_obj(("a", _entry(0, 8)), ("b", _entry(4, 12))), 12, "overlap"),
    ],
    ids=["trailing-bytes", "gap", "duplicate", "overlap"],
)
def test_coverage_and_duplicates_are_named(tmp_path: Path, header: str, data_len: int, message: str) -> None:
    # A key given twice is refused even where both entries agree (safetensors would keep one silently).
    path = _raw_file(tmp_path / "c.safetensors", header, b"\0" * data_len)
    with pytest.raises(CheckpointError, match=message):
        read_header(path)


def test_header_length_cap_is_safetensors_own(tmp_path: Path) -> None:
    """safetensors refuses a header above 100,000,000 bytes (not 100 MiB): one byte over is refused before
    anything is read (the file is sparse: reading it would find no JSON)."""
    assert MAX_HEADER_BYTES == 100_000_000
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", 100_000_001))
        fh.truncate(8 + 100_000_001)
    with pytest.raises(CheckpointError, match="exceeds the 100000000-byte cap"):
        read_header(path)
    with pytest.raises(CheckpointError, match="cap"):
        parse_header_bytes(path, b" " * 100_000_001, 8 + 100_000_001)


@pytest.mark.parametrize("kind", ["socket", "character-device"])
def test_special_files_are_refused_by_their_kind(tmp_path: Path, kind: str) -> None:
    """(A FIFO, which would block the open, is tested in test_discovery under a guard.)"""
    import socket

    path = tmp_path / "s.safetensors"
    with contextlib.ExitStack() as stack:
        if kind == "socket":
            sock = stack.enter_context(socket.socket(socket.AF_UNIX))
            try:
                sock.bind(str(path))
            except OSError as exc:  # a socket path is limited to ~108 bytes
                pytest.skip(f"cannot bind a unix socket at {path}: {exc}")
            expect = "is a socket"
        else:
            path.symlink_to("/dev/null")  # stat follows the link: a character device, no mknod needed
            expect = "is a character device"
        with pytest.raises(CheckpointError, match=f"{expect}, not a regular file") as info:
            read_header(path)
    assert str(path) in str(info.value)
