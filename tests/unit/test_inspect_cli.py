from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest

from ckptprof.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_reports_shards_index_fs_and_residency(
    small_draft: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "inspect", str(small_draft), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["shards"]) == 8
    assert data["total_bytes"] == sum(f.stat().st_size for f in small_draft.glob("*.safetensors"))
    assert data["index"]["consistent"] is True
    assert data["fs_type"] not in ("", None)
    assert 0 <= data["resident_bytes"] <= data["total_bytes"]
    assert data["largest_tensors"][0]["bytes"] >= data["largest_tensors"][-1]["bytes"]
    assert "BF16" in data["dtypes"]


def test_inspect_text(small_draft: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inspect", str(small_draft))
    assert code == 0
    assert "8 shards" in out and "consistent" in out and "largest tensors" in out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _corrupt_header(path: Path) -> None:
    path.write_bytes(struct.pack("<Q", 2**63) + path.read_bytes()[8:])


@pytest.mark.parametrize(
    ("damage", "expect"),
    [
        ("truncate", "past the end"),
        ("huge-header", "cap"),
        ("missing-shard", "named by"),
    ],
)
def test_one_bad_shard_is_named_and_the_rest_reported(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, expect: str
) -> None:
    ckpt = _copy(small_draft, tmp_path / "c")
    victim = sorted(ckpt.glob("*.safetensors"))[2]
    if damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:-100])
    elif damage == "huge-header":
        _corrupt_header(victim)
    else:
        victim.unlink()
    code, out, err = run_cli(capsys, "inspect", str(ckpt), "--json")
    assert code == 2
    assert victim.name in err and expect in err
    assert "Traceback" not in err
    assert len(json.loads(out)["shards"]) == 7  # the damaged shard is left out, the others reported


@pytest.mark.parametrize("case", ["missing", "empty", "pickle-only", "zero-byte", "loop"])
def test_bad_paths_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    target = tmp_path / case
    if case == "empty":
        target.mkdir()
    elif case == "pickle-only":
        target.mkdir()
        (target / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    elif case == "zero-byte":
        target.mkdir()
        (target / "model.safetensors").write_bytes(b"")
    elif case == "loop":
        target.symlink_to(target)
    code, _, err = run_cli(capsys, "inspect", str(target))
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert str(target) in lines[0]
    assert "Traceback" not in err


def test_inspect_never_writes(small_draft: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_draft.iterdir()}
    mtimes = {f.name: f.stat().st_mtime_ns for f in small_draft.iterdir()}
    run_cli(capsys, "inspect", str(small_draft))
    assert before == {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_draft.iterdir()}
    assert mtimes == {f.name: f.stat().st_mtime_ns for f in small_draft.iterdir()}


def test_synth_cli_and_bad_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "synth", str(tmp_path / "s"), "--shards", "4", "--size", "4MB", "-q")
    assert code == 0 and "4 shards" in out
    code, _, err = run_cli(capsys, "synth", str(tmp_path / "t"), "--size", "lots")
    assert code == 2 and "not a size" in err


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("run", "inspect", "synth", "probe", "examples"):
        assert word in out


def test_run_help_names_every_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    """--help is where a user learns the strategies: each one the registry knows is named there."""
    from ckptprof.loader.strategies import AVAILABLE

    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines, sometimes inside a name
    text = text.replace("- ", "-")
    missing = [name for name in AVAILABLE if name not in text]
    assert not missing, f"run --help does not name: {missing}"
