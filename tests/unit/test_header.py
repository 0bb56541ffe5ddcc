from __future__ import annotations

import contextlib
import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.checkpoint import header as header_module
from ckptprof.checkpoint.header import DTYPE_BITS, MAX_HEADER_BYTES, parse_header_bytes, read_header
from ckptprof.errors import CheckpointError

CAP_PROBLEM = r"header length {} exceeds the 100000000-byte cap \(corrupt or hostile\)"


@contextlib.contextmanager
def refused(pattern: str) -> Iterator[None]:
    """The block raises a CheckpointError whose problem (the words after ``<path>: ``) matches ``pattern`` whole.

    Never match the whole message: pytest names each test's folder after the test, so a path holds words such
    as "cap", "overlap" or "finite" and a bare search would be satisfied by the path alone."""
    with pytest.raises(CheckpointError) as info:
        yield
    exc = info.value
    assert str(exc) == f"{exc.path}: {exc.problem}"
    assert re.fullmatch(pattern, exc.problem), exc.problem


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


OFFSETS_ORDER = "tensor 'x': data_offsets must be [begin, end] with 0 <= begin <= end"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dtype": "F99", "shape": [2], "data_offsets": [0, 4]}, "tensor 'x': unknown dtype 'F99'"),
        ({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]},
         "tensor 'x': shape [3] x F32 is 12 bytes but data_offsets span 8"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 800]},
         "tensor 'x': data_offsets end 800 is past the end of the data (8 bytes; truncated?)"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]},
         "tensor 'x': shape must be a list of non-negative integers"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, OFFSETS_ORDER),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0]}, OFFSETS_ORDER),
        ("oops", "tensor 'x': entry is not an object"),
    ],
)  # fmt: skip
def test_rejects_bad_entries(tmp_path: Path, entry: object, message: str) -> None:
    path = write(tmp_path / "bad.safetensors", {"x": entry}, b"\0" * 8)
    with pytest.raises(CheckpointError) as info:
        read_header(path)
    assert (info.value.path, info.value.problem) == (str(path), message)


def test_rejects_overlapping_tensors(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]},
    }
    with refused("tensors 'a' and 'b' overlap in the file"):
        read_header(write(tmp_path / "o.safetensors", header, b"\0" * 16))


def test_huge_header_length_is_capped_before_any_allocation(tmp_path: Path) -> None:
    path = tmp_path / "huge.safetensors"
    path.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    with refused(CAP_PROBLEM.format(2**63)):
        read_header(path)
    assert MAX_HEADER_BYTES < 2**63


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "truncated: 0 bytes, a safetensors file needs at least 8"),
        (b"\x01\x02", "truncated: 2 bytes, a safetensors file needs at least 8"),
        (
            struct.pack("<Q", 100) + b"{}",
            "truncated: header says 100 bytes but the file has 2 after its length",
        ),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", r"header is not valid UTF-8 JSON \(UnicodeDecodeError\)"),
        (struct.pack("<Q", 2) + b"[]", "header is not a JSON object"),
    ],
)
def test_truncated_and_garbage_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "t.safetensors"
    path.write_bytes(content)
    with refused(message):
        read_header(path)


def test_directory_and_missing_file(tmp_path: Path) -> None:
    d = tmp_path / "dir.safetensors"
    d.mkdir()
    with refused("is a directory, not a regular file"):
        read_header(d)
    with refused("no such file"):
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
    from safetensors import SafetensorError, safe_open

    header, data_len, accepted = AGREE[case]
    path = _raw_file(tmp_path / "s.safetensors", header, b"\0" * data_len)
    try:
        with safe_open(str(path), framework="pt", device="cpu"):
            theirs = True
    except SafetensorError:  # safetensors' refusal of the header; any other error is the test's own fault
        theirs = False
    assert theirs == accepted, "the case's expectation about safetensors is wrong"
    try:
        read_header(path)
        ours = True
    except CheckpointError as exc:
        assert str(path) in str(exc)
        ours = False
    assert ours == accepted


COVER_EXACTLY = "safetensors requires the tensors to cover the data exactly"


@pytest.mark.parametrize(
    ("header", "data_len", "message"),
    [
        (
            _obj(("a", _entry(0, 8))),
            12,
            "the tensors cover 8 of the 12 data bytes: the last 4 belong to no tensor; " + COVER_EXACTLY,
        ),
        (
            _obj(("a", _entry(0, 8)), ("b", _entry(12, 16))),
            16,
            "bytes 8..12 of the data section belong to no tensor (a gap before 'b'); " + COVER_EXACTLY,
        ),
        (
            _obj(("a", _entry(0, 8)), ("a", _entry(0, 8))),
            8,
            "header names 'a' twice (a duplicate JSON key: which entry a reader gets depends on its parser)",
        ),
        (_obj(("a", _entry(0, 8)), ("b", _entry(4, 12))), 12, "tensors 'a' and 'b' overlap in the file"),
    ],
    ids=["trailing-bytes", "gap", "duplicate", "overlap"],
)
def test_coverage_and_duplicates_are_named(tmp_path: Path, header: str, data_len: int, message: str) -> None:
    # A key given twice is refused even where both entries agree (safetensors would keep one silently).
    path = _raw_file(tmp_path / "c.safetensors", header, b"\0" * data_len)
    with refused(re.escape(message)):
        read_header(path)


def _sparse(path: Path, header_len: int, file_len: int) -> Path:
    """A file whose length field says ``header_len`` and that is ``file_len`` bytes long, all but the length
    a hole (reading it would find zeros: no JSON)."""
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", header_len))
        fh.truncate(file_len)
    return path


def _spaces_header(length: int) -> bytes:
    """A valid header of exactly ``length`` bytes: an empty object padded with spaces (safetensors pads so too)."""
    return b"{}" + b" " * (length - 2)


def test_header_length_cap_is_safetensors_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """safetensors refuses a header above 100,000,000 bytes (not 100 MiB): one byte over is refused from the
    length field alone, before any of the header is read."""
    assert MAX_HEADER_BYTES == 100_000_000
    # GIVEN a length field one byte over the cap on a file that really has that many bytes (a hole)
    path = _sparse(tmp_path / "big.safetensors", 100_000_001, 8 + 100_000_001)

    # THEN read_header refuses it itself: the header is never read nor handed on to be parsed
    def parsed(*_args: object) -> None:
        raise AssertionError("a header over the cap was read and handed to parse_header_bytes")

    with monkeypatch.context() as patch:
        patch.setattr(header_module, "parse_header_bytes", parsed)
        with refused(CAP_PROBLEM.format(100_000_001)):
            read_header(path)
    # AND the cap is checked before anything else the length field implies: a file far shorter than the length
    # says is refused for the length, not read and found truncated
    short = _sparse(tmp_path / "short.safetensors", 100_000_001, 8 + 10)
    with refused(CAP_PROBLEM.format(100_000_001)):
        read_header(short)


def test_a_header_of_exactly_the_cap_is_read(tmp_path: Path) -> None:
    """The cap is inclusive, as safetensors' own: a header of exactly 100,000,000 bytes is valid."""
    raw = _spaces_header(MAX_HEADER_BYTES)
    path = tmp_path / "at-cap.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    del raw
    h = read_header(path)
    assert (h.header_len, h.tensors, h.file_size) == (MAX_HEADER_BYTES, {}, 8 + MAX_HEADER_BYTES)


def test_parse_header_bytes_holds_the_cap_itself() -> None:
    """parse_header_bytes is the fuzzed entry point and takes headers read by other means: it holds the cap
    whatever JSON the bytes are, both sides of it."""
    path = Path("given.safetensors")
    at_cap = _spaces_header(MAX_HEADER_BYTES)
    assert parse_header_bytes(path, at_cap, 8 + len(at_cap)).header_len == MAX_HEADER_BYTES
    del at_cap
    over = _spaces_header(MAX_HEADER_BYTES + 1)  # valid JSON: only the cap can refuse it
    with refused(CAP_PROBLEM.format(MAX_HEADER_BYTES + 1)):
        parse_header_bytes(path, over, 8 + len(over))


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
        with pytest.raises(CheckpointError) as info:
            read_header(path)
    assert (info.value.path, info.value.problem) == (str(path), f"{expect}, not a regular file")
