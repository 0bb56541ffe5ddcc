"""The corpus of broken checkpoints, for `inspect` and `run`: exit 2, one line naming the file, no traceback,
nothing written to the input; with one bad shard among good ones `run` still measures the good ones."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import subprocess
import sys
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


# The next four passed `inspect` and failed `run` (safetensors refused them): the one validator now refuses
# them for both, with the same line.


def header_over_safetensors_cap(f: Path) -> None:
    """A valid header padded to 100,000,001 bytes: under the old 100 MiB cap, over safetensors' 100,000,000."""
    header, data = _header(f)
    raw = json.dumps(header).encode()
    n = 100_000_001
    f.write_bytes(struct.pack("<Q", n) + raw + b" " * (n - len(raw)) + data)


def duplicate_key(f: Path) -> None:
    """The second tensor renamed to the first's name: json keeps the last, safetensors saw a bad offset."""
    header, data = _header(f)
    names = [k for k in header if k != "__metadata__"]
    text = json.dumps(header).replace(json.dumps(names[1]) + ":", json.dumps(names[0]) + ":")
    raw = text.encode()
    f.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def trailing_data(f: Path) -> None:
    f.write_bytes(f.read_bytes() + b"\0" * 16)


def gap_in_data(f: Path) -> None:
    """8 bytes no tensor claims between the first tensor and the rest."""
    header, data = _header(f)
    entries = sorted(
        (v for k, v in header.items() if k != "__metadata__"),
        key=lambda e: e["data_offsets"],  # type: ignore[arg-type, return-value]
    )
    first_end = entries[0]["data_offsets"][1]  # type: ignore[index]
    for e in entries[1:]:
        e["data_offsets"] = [o + 8 for o in e["data_offsets"]]  # type: ignore[attr-defined]
    _rewrite(f, header, data[:first_end] + b"\0" * 8 + data[first_end:])


BAD_SHARD = {
    "truncated": (truncated, "past the end"),
    "header-2^63": (huge_header, "cap"),
    "not-json": (not_json, "JSON"),
    "unknown-dtype": (unknown_dtype, "unknown dtype"),
    "offsets-past-end": (past_end, "past the end"),
    "overlapping": (overlapping, "overlap"),
    "shape-mismatch": (shape_mismatch, "bytes but data_offsets span"),
    "named-by-index-but-missing": (missing_from_index, "missing"),
    "header-over-safetensors-cap": (header_over_safetensors_cap, "exceeds the 100000000-byte cap"),
    "duplicate-key": (duplicate_key, "twice"),
    "trailing-data": (trailing_data, "belong to no tensor"),
    "gap-in-data": (gap_in_data, "belong to no tensor"),
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
    (said,) = [line for line in _errors(err) if files[1].name in line and expect in line]
    assert "Traceback" not in err
    assert len(json.loads(out)["shards"]) == 2
    # run: the good shards are measured and the session written; one error line names the bad file
    code = main(["run", str(ckpt), "--no-probe", "-q", "-o", str(tmp_path / "run")])
    _, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in err
    (line,) = _errors(err)
    assert files[1].name in line and expect in line
    # the same words as inspect, not a Python exception class in front of them
    reason = said.split(f"{files[1].name}: ", 1)[1]
    assert line.split(f"{files[1].name}: ", 1)[1] == f"{reason} (the other shards were measured)", (
        said,
        line,
    )
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


def _deep_index(d: Path) -> Path:
    _good(d)
    (d / "model.safetensors.index.json").write_text("[" * 100_000)
    return d


WHOLE = {
    "empty-directory": (_empty, "no *.safetensors"),
    "zero-byte-file": (_zero_byte, "truncated"),
    "directory-named-safetensors": (_dir_named_safetensors, "is a directory"),
    "symlink-loop": (_symlink_loop, ""),
    "pickle-only": (_pickle_only, "pickle"),
    "malformed-index": (_malformed_index, "malformed index"),
    "index-nested-100k-deep": (_deep_index, "malformed index: JSON nested too deeply"),
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


def _fifo_only_shard(d: Path) -> Path:
    d.mkdir()
    fifo = d / "model.safetensors"
    os.mkfifo(fifo)
    return fifo


def _fifo_index(d: Path) -> Path:
    _good(d)
    index = d / "model.safetensors.index.json"
    index.unlink()
    os.mkfifo(index)
    return index


def _fifo_shard_among_good(d: Path) -> Path:
    files = _good(d)
    files[1].unlink()
    os.mkfifo(files[1])
    return files[1]


FIFO = {
    "only-shard": _fifo_only_shard,
    "index": _fifo_index,
    "shard-among-good-ones": _fifo_shard_among_good,
}


@pytest.mark.parametrize("command", ["inspect", "run"])
@pytest.mark.parametrize("case", sorted(FIFO))
def test_a_fifo_is_refused_not_waited_on(case: str, command: str, tmp_path: Path) -> None:
    """open() on a FIFO blocks until a writer comes: `inspect` and `run` hung forever. The CLI runs in a
    subprocess under a timeout, so a regression fails here instead of hanging the suite."""
    ckpt = tmp_path / "ckpt"
    fifo = FIFO[case](ckpt)
    argv = [sys.executable, "-m", "ckptprof", command, str(ckpt)]
    if command == "run":
        argv += ["--no-probe", "-q", "--devices", "cpu", "-o", str(tmp_path / "run")]
    else:
        argv += ["--json"]
    try:
        # A hang guard, not a speed claim: the generous timeout only turns a hang into a failure; the refusal
        # itself is what the assertions below check (exit 2, one line naming the FIFO).
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ckptprof {command} hung on the FIFO {fifo}")
    finally:
        # Release anything still blocked opening the FIFO (a regression's rank processes).
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = _errors(proc.stderr)
    if case == "shard-among-good-ones" and command == "run":
        # The rule for any shard file discovery finds unusable (a directory, no read permission): a failed shard,
        # named in the session and on stderr, exit 2; the shards that can be read are measured.
        assert proc.returncode == 2, proc.stderr
        assert any(str(fifo) in line and "is a FIFO, not a regular file" in line for line in lines), (
            proc.stderr
        )
        shards = Session.load(tmp_path / "run" / "session.json").ranks[0].models[0].shards
        failed = {s.file: s.error for s in shards if s.status != "ok"}
        assert list(failed) == [fifo.name] and "is a FIFO" in (failed[fifo.name] or "")
        good = [s.file for s in shards if s.status == "ok"]
        assert good == [f.name for f in sorted(ckpt.glob("*.safetensors")) if f != fifo]
        return
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert str(fifo) in lines[0] and "is a FIFO, not a regular file" in lines[0], lines[0]
    if case == "shard-among-good-ones":  # inspect still reports the good shards
        assert len(json.loads(proc.stdout)["shards"]) == 2


def test_run_names_an_unusable_match_instead_of_dropping_it(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a directory named like a shard beside readable shards WHEN run THEN the same rule as inspect: it is a
    failed shard, named in the session and on stderr, and the exit is 2 (it used to vanish with exit 0)."""
    import shutil

    ckpt = tmp_path / "ckpt"
    shutil.copytree(small_draft, ckpt)
    odd = ckpt / "zz-extra.safetensors"
    odd.mkdir()
    assert main(["run", str(ckpt), "--no-probe", "-q", "--devices", "cpu", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert any(str(odd) in line and "is a directory" in line for line in err.splitlines()), err
    shards = Session.load(tmp_path / "run" / "session.json").ranks[0].models[0].shards
    failed = [s for s in shards if s.status != "ok"]
    assert [s.file for s in failed] == [odd.name]
    assert len(shards) - len(failed) == len(list(small_draft.glob("*.safetensors")))
