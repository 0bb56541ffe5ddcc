"""Session validation's limits and messages, pinned where mutation testing found them unchecked (issue #36).

Every check is driven through ``validate_session_dict`` / ``validate_ceilings`` / ``Session.load`` and judged by
the whole message a user reads: the field's path and what was wrong with it.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ckptprof import session as session_module
from ckptprof.errors import SessionFileError
from ckptprof.session import (
    MAX_COUNT,
    MAX_SECONDS,
    MIN_SECONDS,
    InvalidField,
    Session,
    check_finite,
    validate_ceilings,
    validate_session_dict,
)


def refusal(d: dict[str, Any]) -> str:
    with pytest.raises(InvalidField) as info:
        validate_session_dict(d)
    return str(info.value)


def shard(**fields: Any) -> dict[str, Any]:
    return {
        "ranks": [
            {"rank": 0, "device": "cpu", "models": [{"role": "t", "shards": [{"file": "s", **fields}]}]}
        ]
    }


WHERE = "ranks[0].models[0].shards[0]"


def test_a_valid_session_passes_and_unknown_fields_are_left_alone() -> None:
    validate_session_dict({})
    validate_session_dict({"unknown": math.nan, **shard(bytes=1, read_s=0.5, error=None, later_field=[1])})
    validate_session_dict({"models": None, "ranks": None, "notes": None, "config": None})


@pytest.mark.parametrize(
    ("value", "described"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        ("x" * 40, "the string '" + "x" * 40 + "'"),
        ("y" * 41, "the string '" + "y" * 37 + "...'"),
        (-1, "-1"),
        (1.5, "1.5"),
        (2**64, "1.84e+19"),
        (-(2**64), "-1.84e+19"),
        ([1], "a list"),
        ({"a": 1}, "an object"),
    ],
)
def test_a_wrong_count_is_described_as_the_json_it_was(value: object, described: str) -> None:
    assert refusal(shard(bytes=value)) == f"{WHERE}.bytes: expected a whole number >= 0, got {described}"


def test_non_finite_numbers_are_named_where_they_are() -> None:
    assert refusal(shard(read_s=math.inf)) == f"{WHERE}.read_s: not a finite number (Infinity)"
    assert refusal(shard(read_s=-math.inf)) == f"{WHERE}.read_s: not a finite number (-Infinity)"
    assert refusal(shard(read_s=math.nan)) == f"{WHERE}.read_s: not a finite number (NaN)"
    assert refusal({"notes": ["a", math.nan]}) == "notes[1]: not a finite number (NaN)"
    with pytest.raises(InvalidField) as info:
        check_finite({"a": [0.0, {"b": math.inf}]}, "top")
    assert (str(info.value), info.value.where) == ("top.a[1].b: not a finite number (Infinity)", "top.a[1].b")
    check_finite({"a": [0.0, {"b": 1e308}], "c": "inf"}, "top")


def test_counts_and_seconds_have_their_bounds() -> None:
    validate_session_dict(shard(bytes=0, storage_bytes=MAX_COUNT))
    assert refusal(shard(bytes=MAX_COUNT + 1)).endswith("got 9.22e+18")
    assert refusal(shard(bytes=-1)) == f"{WHERE}.bytes: expected a whole number >= 0, got -1"
    assert refusal(shard(bytes=1.0)) == f"{WHERE}.bytes: expected a whole number >= 0, got 1.0"
    validate_session_dict(shard(read_s=0, h2d_s=MAX_SECONDS, wall_s=MIN_SECONDS, deserialize_s=0.0))
    assert refusal(shard(read_s=MAX_SECONDS * 2)) == (
        f"{WHERE}.read_s: expected a number of seconds >= 0, got 2000000000.0"
    )
    assert refusal(shard(read_s=-0.5)) == f"{WHERE}.read_s: expected a number of seconds >= 0, got -0.5"
    assert refusal(shard(read_s=True)) == f"{WHERE}.read_s: expected a number of seconds >= 0, got true"
    assert (
        refusal(shard(read_s="1")) == f"{WHERE}.read_s: expected a number of seconds >= 0, got the string '1'"
    )
    assert (
        refusal(shard(read_s=MIN_SECONDS / 2))
        == f"{WHERE}.read_s: 5e-13 seconds is below any clock's resolution"
    )


def test_the_seconds_limit_is_thirty_years() -> None:
    # 1e9 s is 31.7 years: the one limit no real load reaches and every corrupt "seconds" field exceeds
    assert MAX_SECONDS == 1e9
    assert refusal(shard(wall_s=1e12)).endswith("got 1000000000000.0")


def test_strings_flags_lists_and_objects_are_checked_by_their_type() -> None:
    assert refusal(shard(status=3)) == f"{WHERE}.status: expected a string, got 3"
    assert refusal(shard(error=[])) == f"{WHERE}.error: expected a string, got a list"
    assert refusal({"notes": "a"}) == "notes: expected a list, got the string 'a'"
    assert refusal({"notes": ["a", 2]}) == "notes[1]: expected a string, got 2"
    assert refusal({"config": []}) == "config: expected an object, got a list"
    assert refusal({"config": {"devices": "cpu"}}) == "config.devices: expected a list, got the string 'cpu'"
    assert refusal({"config": {"tp": -2}}) == "config.tp: expected a whole number >= 0, got -2"
    assert refusal({"environment": 1}) == "environment: expected an object, got 1"
    assert refusal({"created": 5}) == "created: expected a string, got 5"
    assert refusal({"ranks": [{"rank": 0}]}) == "ranks[0]: missing field 'device'"
    assert (
        refusal({"models": [{"role": "t", "path": "/", "fs_type": "x"}]})
        == "models[0]: missing field 'total_bytes'"
    )
    rank = {"rank": 0, "device": "cpu", "models": [{"role": "t", "faithful_sampled_shares": {"cpu": -1}}]}
    assert refusal({"ranks": [rank]}) == (
        "ranks[0].models[0].faithful_sampled_shares.cpu: expected a number >= 0, got -1"
    )
    rank["models"] = [{"role": "t", "faithful_walls": [1.0, -1.0]}]
    assert refusal({"ranks": [rank]}) == (
        "ranks[0].models[0].faithful_walls[1]: expected a number of seconds >= 0, got -1.0"
    )
    rank["models"] = [{"role": "t", "faithful_walls": None}]
    validate_session_dict({"ranks": [rank]})


def test_ceilings_are_rates_per_device_or_alone() -> None:
    validate_ceilings({"storage_read_GBps": None, "h2d_pinned_GBps": {"cuda:0": 1.0}, "storage_streams": 4})
    validate_ceilings({"h2d_pinned_GBps": None, "note": "text", "label_not_a_rate": -1})
    with pytest.raises(InvalidField, match=r"^ceilings\.storage_read_GBps: expected a number >= 0, got -1$"):
        validate_ceilings({"storage_read_GBps": -1})
    with pytest.raises(
        InvalidField, match=r"^probe\.h2d_pinned_GBps\.cuda:0: expected a number >= 0, got -2$"
    ):
        validate_ceilings({"h2d_pinned_GBps": {"cuda:0": -2}}, "probe")
    with pytest.raises(InvalidField, match=r"^ceilings\.h2d_pageable_GBps: expected an object, got 5$"):
        validate_ceilings({"h2d_pageable_GBps": 5})
    with pytest.raises(
        InvalidField, match=r"^ceilings\.storage_streams: expected a whole number >= 0, got 1\.5$"
    ):
        validate_ceilings({"storage_streams": 1.5})
    with pytest.raises(InvalidField, match=r"^ceilings\.x_GBps: not a finite number \(NaN\)$"):
        validate_ceilings({"x_GBps": math.nan})
    assert refusal({"ceilings": {"memcpy_GBps": "fast"}}) == (
        "ceilings.memcpy_GBps: expected a number >= 0, got the string 'fast'"
    )


def test_the_verdict_and_extra_fields_are_checked() -> None:
    assert (
        refusal({"verdict": {"faithful_delta": "x"}})
        == "verdict.faithful_delta: expected a number, got the string 'x'"
    )
    validate_session_dict({"verdict": {"faithful_delta": -0.5, "predictions": [{"predicted_s": None}]}})
    assert refusal({"verdict": {"predictions": [{"predicted_s": -1}]}}) == (
        "verdict.predictions[0].predicted_s: expected a number of seconds >= 0, got -1"
    )
    row = {"strategy": "sglang", "status": "ok", "wall_s": 1.0}
    validate_session_dict({"extra": {"strategies": {"rows": [row], "warnings": []}}})
    assert refusal({"extra": {"strategies": {"rows": [{"strategy": "sglang"}]}}}) == (
        "extra.strategies.rows[0]: missing field 'status'"
    )
    assert refusal({"extra": {"prediction_check": [{"error": True}]}}) == (
        "extra.prediction_check[0].error: expected a number, got true"
    )


def test_py_spy_frames_are_rank_keyed_name_and_seconds_pairs() -> None:
    validate_session_dict({"extra": {"py_spy_top_frames": {"0": {"read": [["f", 0.5]]}}}})
    assert refusal({"extra": {"py_spy_top_frames": {"r0": {}}}}) == (
        "extra.py_spy_top_frames.r0: expected a rank number as the key"
    )
    assert refusal({"extra": {"py_spy_top_frames": {"1": {"read": [["f", 0.5, 1]]}}}}) == (
        "extra.py_spy_top_frames.1.read[0]: expected [frame, seconds], got a list"
    )
    assert refusal({"extra": {"py_spy_top_frames": {"1": {"read": ["f"]}}}}) == (
        "extra.py_spy_top_frames.1.read[0]: expected [frame, seconds], got the string 'f'"
    )
    assert refusal({"extra": {"py_spy_top_frames": {"1": {"read": [[2, 0.5]]}}}}) == (
        "extra.py_spy_top_frames.1.read[0][0]: expected a string, got 2"
    )
    assert refusal({"extra": {"py_spy_top_frames": {"1": {"read": [["f", -1]]}}}}) == (
        "extra.py_spy_top_frames.1.read[0][1]: expected a number of seconds >= 0, got -1"
    )


def write(tmp_path: Path, d: object, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(d))
    return path


def test_load_names_the_file_and_the_field(tmp_path: Path) -> None:
    good = {"schema_version": 1, **shard(read_s=0.5)}
    assert Session.load(write(tmp_path, good)).ranks[0].models[0].shards[0].read_s == 0.5
    path = write(tmp_path, {"schema_version": 1, **shard(read_s=-1)})
    with pytest.raises(SessionFileError) as info:
        Session.load(path)
    assert str(info.value) == (
        f"{path}: not a valid ckptprof session: field {WHERE}.read_s: expected a number of seconds >= 0, got -1"
    )


def test_a_compressed_session_is_inflated_within_a_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps({"schema_version": 1, "notes": ["n"]}).encode()
    path = tmp_path / "s.json.gz"
    path.write_bytes(gzip.compress(text))
    assert Session.load(path).notes == ["n"]
    monkeypatch.setattr(session_module, "MAX_INFLATED_BYTES", len(text))
    assert Session.load(path).notes == ["n"]  # exactly at the cap
    monkeypatch.setattr(session_module, "MAX_INFLATED_BYTES", len(text) - 1)
    with pytest.raises(SessionFileError) as info:
        Session.load(path)
    assert str(info.value) == f"{path}: inflates past {len(text) - 1} bytes: not a session"
    monkeypatch.undo()
    torn = tmp_path / "torn.json.gz"
    torn.write_bytes(gzip.compress(text)[:-6])
    with pytest.raises(SessionFileError, match=r"named \.gz but not a whole gzip file"):
        Session.load(torn)
    plain = tmp_path / "plain.json.gz"
    plain.write_text("{}")
    with pytest.raises(SessionFileError, match=r"named \.gz but not a whole gzip file"):
        Session.load(plain)


def test_rates_may_be_zero_or_fractional_and_odd_values_are_described() -> None:
    validate_ceilings({"x_GBps": 0, "y_GBps": 0.5, "h2d_pinned_GBps": {"cuda:0": 0.0}})
    # an int too large for a count is written in full where it is described as seconds
    assert refusal(shard(read_s=MAX_COUNT)) == (
        f"{WHERE}.read_s: expected a number of seconds >= 0, got 9223372036854775807"
    )
    # a value no JSON parser makes (a dict built in Python) is named by its type
    assert refusal(shard(bytes=(1,))) == f"{WHERE}.bytes: expected a whole number >= 0, got tuple"
    with pytest.raises(InvalidField, match=r"^ceilings: expected an object, got 5$"):
        validate_ceilings(5)
    assert (
        refusal({"extra": {"py_spy_top_frames": 5}}) == "extra.py_spy_top_frames: expected an object, got 5"
    )


def load_problem(path: Path) -> str:
    with pytest.raises(SessionFileError) as info:
        Session.load(path)
    assert info.value.path == str(path)
    prefix = f"{path}: "
    assert str(info.value).startswith(prefix)
    return str(info.value)[len(prefix) :]


def test_every_unreadable_session_file_is_named_with_its_problem(tmp_path: Path) -> None:
    assert load_problem(tmp_path / "absent.json") == "no such file"
    assert load_problem(tmp_path) == "is a directory, not a session JSON file"
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00")
    assert load_problem(binary) == "not a session JSON file (binary, not UTF-8 text)"
    broken = tmp_path / "c.json"
    broken.write_text("{")
    assert load_problem(broken) == "not JSON (Expecting property name enclosed in double quotes at line 1)"
    listed = write(tmp_path, [1], "d.json")
    assert load_problem(listed) == "not a ckptprof session (top level is not an object)"
    deep = tmp_path / "e.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert load_problem(deep) == "not a valid ckptprof session: nested too deeply"
    huge = tmp_path / "f.json"
    huge.write_text('{"schema_version": ' + "1" * 5000 + "}")
    assert load_problem(huge).startswith("not a valid ckptprof session: Exceeds the limit (4300 digits)")
    future = write(tmp_path, {"schema_version": 2}, "g.json")
    assert (
        load_problem(future)
        == "not a valid ckptprof session: unsupported schema_version 2 (this ckptprof reads 1)"
    )
    torn = tmp_path / "h.json.gz"
    torn.write_bytes(gzip.compress(b"{}")[:-6])
    assert load_problem(torn).startswith("named .gz but not a whole gzip file (")
