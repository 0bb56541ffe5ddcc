"""The header validator's limits and messages, pinned where mutation testing found them unchecked (issue #36).

Each refusal is checked by its whole problem text (``CheckpointError.problem``): the message is what a user reads,
and the exact text tells one refusal from another (a file that is too short from one whose header is too long).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
from pathlib import Path

import pytest

from ckptprof.checkpoint import header as header_module
from ckptprof.checkpoint.header import (
    MAX_HEADER_BYTES,
    MAX_HEADER_DEPTH,
    ShardHeader,
    TensorEntry,
    check_layout,
    load_json_header,
    open_regular,
    parse_header_bytes,
    read_header,
    special_file_problem,
)
from ckptprof.errors import CheckpointError

P = Path("shard.safetensors")


def problem(call: object, path: Path, *args: object) -> str:
    """The problem text of the CheckpointError that ``call(path, *args)`` raises (which must name ``path``)."""
    with pytest.raises(CheckpointError) as info:
        call(path, *args)  # type: ignore[operator]
    assert info.value.path == str(path)
    return info.value.problem


def parse(doc: object, data: int = 0) -> ShardHeader:
    raw = json.dumps(doc).encode()
    return parse_header_bytes(P, raw, 8 + len(raw) + data)


def parse_problem(doc: object, data: int = 0) -> str:
    raw = json.dumps(doc).encode()
    return problem(parse_header_bytes, P, raw, 8 + len(raw) + data)


def f32(begin: int, end: int, *shape: int) -> dict[str, object]:
    return {"dtype": "F32", "shape": list(shape), "data_offsets": [begin, end]}


def test_a_parsed_header_knows_its_ranges() -> None:
    raw = json.dumps({"__metadata__": {"k": "v"}, "b": f32(8, 20, 3), "a": f32(0, 8, 1, 2)}).encode()
    h = parse_header_bytes(P, raw, 8 + len(raw) + 20)
    assert (h.path, h.file_size, h.header_len, h.metadata) == (P, 8 + len(raw) + 20, len(raw), {"k": "v"})
    assert h.tensors["a"] == TensorEntry(name="a", dtype="F32", shape=(1, 2), begin=0, end=8)
    assert (h.tensors["b"].nbytes, h.tensors["b"].numel, h.tensors["a"].numel) == (12, 3, 2)
    assert (h.data_start, h.tensor_bytes) == (8 + len(raw), 20)
    assert h.absolute_range("b") == (8 + len(raw) + 8, 8 + len(raw) + 20)
    assert parse({}).metadata == {} and parse({}).tensors == {}


def test_read_header_refuses_short_long_and_truncated_files(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(b"\x01\x02\x03")
    assert problem(read_header, path) == "truncated: 3 bytes, a safetensors file needs at least 8"
    # the header length says more than the file holds
    path.write_bytes(struct.pack("<Q", 20) + b"{}")
    assert problem(read_header, path) == "truncated: header says 20 bytes but the file has 2 after its length"
    # a header of exactly the cap is not refused by the cap (only by the file being too short for it)
    path.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES) + b"{}")
    assert problem(read_header, path) == (
        f"truncated: header says {MAX_HEADER_BYTES} bytes but the file has 2 after its length"
    )
    path.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}")
    assert problem(read_header, path) == (
        f"header length {MAX_HEADER_BYTES + 1} exceeds the 100000000-byte cap (corrupt or hostile)"
    )
    # a header that fills the file exactly is read
    path.write_bytes(struct.pack("<Q", 2) + b"{}")
    h = read_header(path)
    assert (h.header_len, h.file_size, h.tensors) == (2, 10, {})
    # an eight-byte file with a zero length is a file whose header is not JSON
    path.write_bytes(struct.pack("<Q", 0))
    assert problem(read_header, path) == "header is not valid UTF-8 JSON (JSONDecodeError)"


def test_the_parsed_header_is_capped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = b"{}" + b" " * 8
    monkeypatch.setattr(header_module, "MAX_HEADER_BYTES", len(raw))
    assert parse_header_bytes(P, raw, 8 + len(raw)).header_len == len(raw)  # at the cap: read
    monkeypatch.setattr(header_module, "MAX_HEADER_BYTES", len(raw) - 1)
    assert problem(parse_header_bytes, P, raw, 8 + len(raw)) == (
        "header length 10 exceeds the 9-byte cap (corrupt or hostile)"
    )


def test_json_is_read_as_strictly_as_safetensors() -> None:
    assert problem(load_json_header, P, b'{"a": 1, "a": 2}') == (
        "header names 'a' twice (a duplicate JSON key: which entry a reader gets depends on its parser)"
    )
    assert problem(load_json_header, P, b'{"b": 0, "a": 1, "c": 2, "a": 3}') == (
        "header names 'a' twice (a duplicate JSON key: which entry a reader gets depends on its parser)"
    )
    assert problem(load_json_header, P, b'{"a": NaN}') == "header is not valid UTF-8 JSON (ValueError)"
    assert problem(load_json_header, P, b"\xff") == "header is not valid UTF-8 JSON (UnicodeDecodeError)"
    assert problem(load_json_header, P, b"[1]") == "header is not a JSON object"
    assert (
        problem(load_json_header, P, b"[" * 100_000) == "header is not valid UTF-8 JSON (nested too deeply)"
    )
    # "-0" (and any negative) is read as a float, never as an index
    doc = load_json_header(P, b'{"x": [-0, 3, -5]}')
    assert doc == {"x": [0.0, 3, -5.0]} and isinstance(doc["x"][0], float) and isinstance(doc["x"][1], int)
    assert isinstance(load_json_header(P, b'{"x": [3]}')["x"][0], int)
    raw = b'{"t": {"dtype": "F32", "shape": [0], "data_offsets": [-0, 0]}}'
    assert problem(parse_header_bytes, P, raw, 8 + len(raw)) == (
        "tensor 't': data_offsets must be [begin, end] with 0 <= begin <= end"
    )


def test_nesting_is_limited_in_the_extra_fields_of_an_entry() -> None:
    def nested(levels: int) -> object:
        value: object = []
        for _ in range(levels - 1):
            value = [value]
        return value

    # header object + entry + the value's levels: MAX_HEADER_DEPTH in all is accepted, one more is not
    ok = {"t": {**f32(0, 0, 0), "extra": nested(MAX_HEADER_DEPTH - 2)}}
    assert parse(ok).tensors["t"].nbytes == 0
    deep = {"t": {**f32(0, 0, 0), "extra": nested(MAX_HEADER_DEPTH - 1)}}
    assert parse_problem(deep) == (
        "tensor 't': field 'extra' nests deeper than 127 JSON levels (safetensors' parser refuses it)"
    )
    # a dict nests as deep as a list; a deep value under a known field name is the field's problem instead
    as_dict: object = {}
    for _ in range(MAX_HEADER_DEPTH - 2):
        as_dict = {"k": as_dict}
    assert "nests deeper" in parse_problem({"t": {**f32(0, 0, 0), "extra": as_dict}})
    assert "nests deeper" not in parse_problem({"t": {**f32(0, 0, 0), "shape": nested(MAX_HEADER_DEPTH)}})
    # far deeper than the limit: the walk stops at the limit and still refuses
    assert "nests deeper than 127" in parse_problem({"t": {**f32(0, 0, 0), "extra": nested(300)}})
    # a long but shallow list nests one level
    assert parse({"t": {**f32(0, 0, 0), "extra": [[1]] * 300}}).tensors["t"].shape == (0,)


def test_metadata_must_map_strings_to_strings() -> None:
    assert parse({"__metadata__": {"a": "b"}}).metadata == {"a": "b"}
    for bad in ({"a": 1}, ["a"], {"a": None}):
        assert parse_problem({"__metadata__": bad}) == "__metadata__ must map strings to strings"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "tensor 't': entry is not an object"),
        ({"shape": [1], "data_offsets": [0, 4]}, "tensor 't': unknown dtype None"),
        ({**f32(0, 4, 1), "dtype": 32}, "tensor 't': unknown dtype 32"),
        ({**f32(0, 4), "shape": 1}, "tensor 't': shape must be a list of non-negative integers"),
        ({**f32(0, 4), "shape": [True]}, "tensor 't': shape must be a list of non-negative integers"),
        ({**f32(0, 4), "shape": [1.0]}, "tensor 't': shape must be a list of non-negative integers"),
        (
            {**f32(0, 4, 1), "data_offsets": (0, 4, 4)},
            "tensor 't': data_offsets must be [begin, end] with 0 <= begin <= end",
        ),
        (
            {**f32(0, 4, 1), "data_offsets": [0, True]},
            "tensor 't': data_offsets must be [begin, end] with 0 <= begin <= end",
        ),
        (
            {**f32(0, 4, 1), "data_offsets": "0,4"},
            "tensor 't': data_offsets must be [begin, end] with 0 <= begin <= end",
        ),
        (f32(0, 12, 3), "tensor 't': data_offsets end 12 is past the end of the data (8 bytes; truncated?)"),
        (f32(0, 8, 3), "tensor 't': shape [3] x F32 is 12 bytes but data_offsets span 8"),
        (
            {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]},
            "tensor 't': shape [3] x F4 is 1.5 bytes but data_offsets span 1",
        ),
        (
            f32(0, 0, 2**32, 2**32, 0),
            "tensor 't': shape [4294967296, 4294967296, 0] overflows a 64-bit element count",
        ),
        (f32(0, 0, 2**62), "tensor 't': shape [4611686018427387904] x F32 overflows a 64-bit bit count"),
    ],
)
def test_each_bad_entry_is_refused_with_its_own_message(spec: object, message: str) -> None:
    assert parse_problem({"t": spec}, data=8) == message


def test_sizes_at_the_64_bit_limits() -> None:
    def u8(*shape: int) -> str:
        return parse_problem({"t": {"dtype": "U8", "shape": list(shape), "data_offsets": [0, 0]}})

    # 2**61 - 1 bytes is 2**64 - 8 bits: counted (and then too large for this file); 2**61 bytes is 2**64 bits
    assert (
        u8(2**61 - 1)
        == "tensor 't': shape [2305843009213693951] x U8 is 2.30584e+18 bytes but data_offsets span 0"
    )
    assert u8(2**61) == "tensor 't': shape [2305843009213693952] x U8 overflows a 64-bit bit count"
    # 2**64 - 1 elements still count; 2**64 do not
    assert u8(2**64 - 1).endswith("x U8 overflows a 64-bit bit count")
    assert u8(2**64) == "tensor 't': shape [18446744073709551616] overflows a 64-bit element count"


def test_the_tensors_must_tile_the_data_exactly() -> None:
    a, b = TensorEntry("a", "U8", (4,), 0, 4), TensorEntry("b", "U8", (4,), 4, 8)
    check_layout(P, {"b": b, "a": a}, 8)  # listed out of order: sorted by offset first
    check_layout(P, {}, 0)
    empty = TensorEntry("e", "U8", (0,), 0, 0)
    check_layout(P, {"e": empty, "a": a}, 4)  # an empty tensor at the start takes no room
    overlap = TensorEntry("c", "U8", (4,), 2, 6)
    assert problem(check_layout, P, {"a": a, "c": overlap}, 6) == "tensors 'a' and 'c' overlap in the file"
    gap = TensorEntry("g", "U8", (2,), 6, 8)
    assert problem(check_layout, P, {"a": a, "g": gap}, 8) == (
        "bytes 4..6 of the data section belong to no tensor (a gap before 'g'); safetensors requires the tensors "
        "to cover the data exactly"
    )
    assert problem(check_layout, P, {"a": a}, 7) == (
        "the tensors cover 4 of the 7 data bytes: the last 3 belong to no tensor; safetensors requires the "
        "tensors to cover the data exactly"
    )
    # through the parser: the data section is what follows the header
    assert parse({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, data=4).tensor_bytes == 4


def test_special_files_are_named_by_kind(tmp_path: Path) -> None:
    assert special_file_problem(stat.S_IFREG | 0o644) is None
    assert special_file_problem(stat.S_IFDIR) == "is a directory, not a regular file"
    assert special_file_problem(stat.S_IFIFO) == "is a FIFO, not a regular file"
    assert special_file_problem(stat.S_IFSOCK) == "is a socket, not a regular file"
    assert special_file_problem(stat.S_IFCHR) == "is a character device, not a regular file"
    assert special_file_problem(stat.S_IFBLK) == "is a block device, not a regular file"
    assert special_file_problem(0) == "is a special file, not a regular file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert problem(open_regular, fifo) == "is a FIFO, not a regular file"
    assert problem(read_header, fifo) == "is a FIFO, not a regular file"
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert problem(read_header, sock_path) == "is a socket, not a regular file"
    regular = tmp_path / "r"
    regular.write_bytes(b"x")
    fd = open_regular(regular)
    try:
        assert os.read(fd, 1) == b"x"
    finally:
        os.close(fd)


def test_the_span_is_the_entrys_own() -> None:
    doc = {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": f32(8, 16, 3)}
    assert parse_problem(doc, data=16) == "tensor 'b': shape [3] x F32 is 12 bytes but data_offsets span 8"


class _Stat:
    def __init__(self, mode: int, size: int) -> None:
        self.st_mode, self.st_size = mode, size


def test_a_file_that_changes_under_the_reader_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fstat = os.fstat
    path = tmp_path / "x.safetensors"

    def grown(fd: int) -> _Stat:  # the file shrinks after fstat: fstat still says 100 bytes more
        st = real_fstat(fd)
        return _Stat(st.st_mode, st.st_size + 100)

    monkeypatch.setattr(header_module.os, "fstat", grown)
    path.write_bytes(struct.pack("<Q", 20) + b"{}")
    assert problem(read_header, path) == "truncated: header says 20 bytes, read 2"
    path.write_bytes(b"\x01\x02\x03")
    assert problem(read_header, path) == "truncated: 3 bytes, a safetensors file needs at least 8"
    monkeypatch.undo()
    # a regular file swapped for a FIFO between the name's stat and the open: the descriptor's kind is checked.
    # A reader and a writer hold the FIFO open, so even an open without O_NONBLOCK returns here (never hangs).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    try:
        monkeypatch.setattr(header_module.os, "stat", lambda p: _Stat(stat.S_IFREG | 0o644, 0))
        assert problem(open_regular, fifo) == "is a FIFO, not a regular file"
        assert problem(read_header, fifo) == "is a FIFO, not a regular file"
    finally:
        os.close(writer)
        os.close(reader)
    monkeypatch.undo()
    # fstat failing on the open descriptor: the descriptor is closed and the error named with the file
    regular = tmp_path / "r.safetensors"
    regular.write_bytes(struct.pack("<Q", 2) + b"{}")

    def failing(fd: int) -> _Stat:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(header_module.os, "fstat", failing)
    assert problem(read_header, regular) == header_module.os_problem(OSError(5, "Input/output error"))
