from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.errors import SessionFileError
from ckptprof.session import SCHEMA_VERSION, ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming


def sample() -> Session:
    return Session(
        config={"tp": 2, "devices": ["cpu"], "cache": "cold", "strategy": "sglang"},
        models=[
            ModelInfo(role="draft", path="/x", fs_type="ext4", total_bytes=10, shards=[ShardInfo("a", 10, 1)])
        ],
        ranks=[
            RankResult(
                rank=0,
                device="cpu",
                models=[
                    RankModel(role="draft", wall_s=1.0, shards=[ShardTiming(file="a", bytes=10, read_s=0.5)])
                ],
            )
        ],
        ceilings={"storage_read_GBps": 1.4},
        verdict={"bottleneck": "storage"},
    )


def test_round_trip(tmp_path: Path) -> None:
    s = sample()
    path = s.save(tmp_path / "run" / "session.json")
    again = Session.load(path)
    assert again == s
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    assert next(iter(json.loads(path.read_text()))) == "schema_version"


def test_contract_keys_are_present() -> None:
    d = sample().to_dict()
    assert {"schema_version", "config", "models", "ranks", "ceilings", "verdict"} <= set(d)
    shard = d["ranks"][0]["models"][0]["shards"][0]
    for key in (
        "file",
        "bytes",
        "storage_bytes",
        "major_faults",
        "read_s",
        "deserialize_s",
        "h2d_s",
        "h2d_bytes",
        "wall_s",
    ):
        assert key in shard
    assert {"role", "path", "fs_type", "total_bytes", "shards"} <= set(d["models"][0])
    assert {"rank", "device", "status", "error", "models"} <= set(d["ranks"][0])


def test_newer_fields_are_ignored_older_versions_refused(tmp_path: Path) -> None:
    d = sample().to_dict()
    d["ranks"][0]["models"][0]["shards"][0]["future_field"] = 1
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    assert Session.load(p).ranks[0].models[0].shards[0].read_s == 0.5
    d["schema_version"] = 99
    p.write_text(json.dumps(d))
    with pytest.raises(SessionFileError, match="schema_version"):
        Session.load(p)


@pytest.mark.parametrize("content", ["", "{", "[]", '{"schema_version": 1, "ranks": [3]}'])
def test_bad_session_files(tmp_path: Path, content: str) -> None:
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(SessionFileError) as info:
        Session.load(p)
    assert str(p) in str(info.value)


def test_a_binary_file_is_named_as_not_a_session(tmp_path: Path) -> None:
    p = tmp_path / "trace.bin"
    p.write_bytes(b"\x00\xea\xff" * 100)
    with pytest.raises(SessionFileError, match=r"not a session JSON file \(binary, not UTF-8 text\)"):
        Session.load(p)
