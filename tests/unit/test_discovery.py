from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptprof.checkpoint.discovery import discover, natural_key, order_files
from ckptprof.errors import CheckpointError


def touch(d: Path, *names: str) -> None:
    for n in names:
        (d / n).write_bytes(b"x")


def test_pattern_order_prefers_safetensors(tmp_path: Path) -> None:
    touch(tmp_path, "a.bin", "b.safetensors", "c.pt")
    ckpt = discover(tmp_path)
    assert ckpt.format == "safetensors"
    assert [f.name for f in ckpt.files] == ["b.safetensors"]


def test_falls_back_to_bin_then_pt(tmp_path: Path) -> None:
    touch(tmp_path, "pytorch_model.bin", "training_args.bin", "x.pt")
    ckpt = discover(tmp_path)
    assert ckpt.format == "bin"
    assert [f.name for f in ckpt.files] == ["pytorch_model.bin"]  # training_args.bin is never weights


def test_index_filters_files_and_reports_inconsistency(tmp_path: Path) -> None:
    touch(tmp_path, "m-1.safetensors", "m-2.safetensors", "stray.safetensors")
    index = {"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-3.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    ckpt = discover(tmp_path)
    assert [f.name for f in ckpt.files] == ["m-1.safetensors", "m-2.safetensors"]
    assert ckpt.missing_from_disk == ["m-3.safetensors"]
    assert ckpt.not_in_index == ["stray.safetensors"]


@pytest.mark.parametrize(
    "content", ["{", "[]", '{"weight_map": 3}', '{"weight_map": {"a": "../etc/passwd"}}']
)
def test_malformed_index(tmp_path: Path, content: str) -> None:
    touch(tmp_path, "m.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text(content)
    with pytest.raises(CheckpointError, match="malformed index") as info:
        discover(tmp_path)
    assert "model.safetensors.index.json" in str(info.value)


def test_orders() -> None:
    files = [Path(f"/c/model-{i}.safetensors") for i in (10, 2, 1)]
    assert [p.name for p in order_files(files, "sorted")] == [
        "model-1.safetensors",
        "model-10.safetensors",
        "model-2.safetensors",
    ]
    assert [p.name for p in order_files(files, "natural")] == [
        "model-1.safetensors",
        "model-2.safetensors",
        "model-10.safetensors",
    ]
    assert order_files(files, "glob") == files
    assert natural_key("a10b2") == ["a", 10, "b", 2, ""]


def test_glob_order_is_the_directory_listing(tmp_path: Path) -> None:
    touch(tmp_path, *(f"s{i}.safetensors" for i in range(20)))
    listed = [n for n in os.listdir(tmp_path) if n.endswith(".safetensors")]
    assert sorted(f.name for f in discover(tmp_path, order="glob").files) == sorted(listed)


def test_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such file"):
        discover(tmp_path / "missing")
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors"):
        discover(tmp_path)
    (tmp_path / "dir.safetensors").mkdir()
    with pytest.raises(CheckpointError, match="is a directory"):
        discover(tmp_path)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(CheckpointError) as info:
        discover(loop)
    assert str(loop) in str(info.value)
