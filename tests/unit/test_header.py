from __future__ import annotations

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
