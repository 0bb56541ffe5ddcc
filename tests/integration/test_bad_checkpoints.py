"""The corpus of broken checkpoints, for `inspect` and `run`: exit 2, one line naming the file, no traceback,
nothing written to the input; with one bad shard among good ones `run` still measures the good ones."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ckptprof.cli.main import main
from ckptprof.session import Session


def _good(d: Path, shards: int = 3) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    files, weight_map = [], {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {
            f"layers.{i}.mlp.up_proj.weight": torch.randn(16, 8),
            f"layers.{i}.input_layernorm.weight": torch.randn(8),
        }
        save_file(tensors, str(d / name))
        weight_map.update(dict.fromkeys(tensors, name))
        files.append(d / name)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return files


def _header(path: Path) -> tuple[dict[str, dict[str, object]], bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _rewrite(path: Path, header: dict[str, object], data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def truncated(f: Path) -> None:
    f.write_bytes(f.read_bytes()[:-50])


def huge_header(f: Path) -> None:
    f.write_bytes(struct.pack("<Q", 2**63) + f.read_bytes()[8:])


def not_json(f: Path) -> None:
    f.write_bytes(struct.pack("<Q", 16) + b"this is not json" + b"\0" * 64)


def _edit(change: Callable[[dict[str, dict[str, object]]], None]) -> Callable[[Path], None]:
    def apply(f: Path) -> None:
        header, data = _header(f)
        change(header)
        _rewrite(f, header, data)

    return apply


def _first(h: dict[str, dict[str, object]]) -> dict[str, object]:
    return next(v for k, v in h.items() if k != "__metadata__")


unknown_dtype = _edit(lambda h: _first(h).update(dtype="F99"))
past_end = _edit(lambda h: _first(h).update(data_offsets=[0, 10**9]))
shape_mismatch = _edit(lambda h: _first(h).update(shape=[3, 3]))


def overlapping(f: Path) -> None:
    header, data = _header(f)
    entries = [v for k, v in header.items() if k != "__metadata__"]
    entries[1]["data_offsets"] = [0, entries[1]["data_offsets"][1] - entries[1]["data_offsets"][0]]  # type: ignore[index, operator]
    _rewrite(f, header, data)


def missing_from_index(f: Path) -> None:
    f.unlink()


BAD_SHARD = {
    "truncated": (truncated, "past the end"),
    "header-2^63": (huge_header, "cap"),
    "not-json": (not_json, "JSON"),
    "unknown-dtype": (unknown_dtype, "unknown dtype"),
    "offsets-past-end": (past_end, "past the end"),
    "overlapping": (overlapping, "overlap"),
    "shape-mismatch": (shape_mismatch, "bytes but data_offsets span"),
    "named-by-index-but-missing": (missing_from_index, "missing"),
}


def _digests(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error:" in line]


@pytest.mark.parametrize("case", sorted(BAD_SHARD))
def test_one_bad_shard_among_good_ones(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "ckpt"
    files = _good(ckpt)
    damage, expect = BAD_SHARD[case]
    damage(files[1])
    before = _digests(ckpt)
    # inspect: the bad shard is one error line naming it; the good shards are reported
    code = main(["inspect", str(ckpt), "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert [line for line in _errors(err) if files[1].name in line and expect in line], err
    assert "Traceback" not in err
    assert len(json.loads(out)["shards"]) == 2
    # run: the good shards are measured and the session written; one error line names the bad file
    code = main(["run", str(ckpt), "--no-probe", "-q", "-o", str(tmp_path / "run")])
    _, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in err
    (line,) = _errors(err)
    assert files[1].name in line and expect in line
    shards = Session.load(tmp_path / "run" / "session.json").ranks[0].models[0].shards
    assert [s.status for s in shards] == ["ok", "failed", "ok"]
    assert _digests(ckpt) == before


def _empty(d: Path) -> Path:
    d.mkdir()
    return d


def _zero_byte(d: Path) -> Path:
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"")
    return d


def _dir_named_safetensors(d: Path) -> Path:
    (d / "model.safetensors").mkdir(parents=True)
    return d


def _symlink_loop(d: Path) -> Path:
    d.symlink_to(d)
    return d


def _pickle_only(d: Path) -> Path:
    d.mkdir()
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    return d


def _malformed_index(d: Path) -> Path:
    _good(d)
    (d / "model.safetensors.index.json").write_text("{ not json")
    return d


def _missing(d: Path) -> Path:
    return d


WHOLE = {
    "empty-directory": (_empty, "no *.safetensors"),
    "zero-byte-file": (_zero_byte, "truncated"),
    "directory-named-safetensors": (_dir_named_safetensors, "is a directory"),
    "symlink-loop": (_symlink_loop, ""),
    "pickle-only": (_pickle_only, "pickle"),
    "malformed-index": (_malformed_index, "malformed index"),
    "no-such-path": (_missing, "no such file"),
}


@pytest.mark.parametrize("command", ["inspect", "run"])
@pytest.mark.parametrize("case", sorted(WHOLE))
def test_unusable_checkpoints(
    case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expect = WHOLE[case]
    target = make(tmp_path / "ckpt")
    before = _digests(target) if target.is_dir() and not target.is_symlink() else {}
    argv = [command, str(target)] + (
        ["--no-probe", "-q", "-o", str(tmp_path / "run")] if command == "run" else []
    )
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2
    lines = _errors(err)
    assert len(lines) == 1, err
    assert str(target) in lines[0] and expect in lines[0]
    assert "Traceback" not in err
    if before:
        assert _digests(target) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: permissions are not enforced")
def test_permission_denied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _good(tmp_path / "ckpt")
    files[0].chmod(0)
    assert main(["inspect", str(tmp_path / "ckpt")]) == 2
    assert "permission denied" in capsys.readouterr().err
