from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.checkpoint.discovery import MAX_INDEX_BYTES, discover, natural_key, order_files, read_index
from ckptprof.checkpoint.header import read_header
from ckptprof.checkpoint.inspection import inspect_checkpoint
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


@contextlib.contextmanager
def fifo_guard(*fifos: Path) -> Iterator[None]:
    """Should the code under test open one of ``fifos`` (an open that blocks until a writer comes), open it for
    writing and close it at once: the reader gets EOF and the test fails instead of hanging, and the guard
    fails it too, saying the FIFO was opened."""
    stop = threading.Event()
    opened: list[str] = []

    def watch() -> None:
        while not stop.is_set():
            for fifo in fifos:
                try:  # succeeds only while a reader has the FIFO open or is blocked opening it
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    if exc.errno not in (errno.ENXIO, errno.ENOENT):
                        raise
                    continue
                os.close(fd)
                opened.append(str(fifo))
            stop.wait(0.05)

    thread = threading.Thread(target=watch, name="fifo-guard", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    assert not opened, f"the code under test opened the FIFO {sorted(set(opened))}"


def _good_shards(d: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    for name in ("m-1.safetensors", "m-2.safetensors"):
        save_file({f"{name}.w": np.ones(4, dtype=np.float32)}, str(d / name))


def test_fifo_shard_is_refused_by_name_never_opened(tmp_path: Path) -> None:
    _good_shards(tmp_path)
    fifo = tmp_path / "m-3.safetensors"
    os.mkfifo(fifo)
    index = {"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-3.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with fifo_guard(fifo):
        ckpt = discover(tmp_path)
        assert [f.name for f in ckpt.files] == ["m-1.safetensors", "m-2.safetensors"]
        assert ckpt.problems == [f"{fifo}: is a FIFO, not a regular file"]
        assert ckpt.missing_from_disk == []  # it is there, just not a file
        # inspect: one error line naming it, the good shards still reported
        result = inspect_checkpoint(tmp_path, residency=False)
        assert result.errors == [f"{fifo}: is a FIFO, not a regular file"]
        assert [h.path.name for h in result.headers] == ["m-1.safetensors", "m-2.safetensors"]
        # named directly, or read directly: refused by its stat, never opened
        with pytest.raises(CheckpointError, match="is a FIFO, not a regular file") as info:
            discover(fifo)
        assert str(fifo) in str(info.value)
        with pytest.raises(CheckpointError, match="is a FIFO, not a regular file"):
            read_header(fifo)
        # the only shard: the checkpoint is unusable, and the line says why
        for good in ("m-1.safetensors", "m-2.safetensors", "model.safetensors.index.json"):
            (tmp_path / good).unlink()
        with pytest.raises(CheckpointError, match=f"no usable.*{fifo}: is a FIFO, not a regular file"):
            discover(tmp_path)


def test_fifo_index_is_refused_never_opened(tmp_path: Path) -> None:
    _good_shards(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    os.mkfifo(index)
    with fifo_guard(index), pytest.raises(CheckpointError) as info:
        discover(tmp_path)
    assert str(info.value) == f"{index}: is a FIFO, not a regular file"


@pytest.mark.parametrize(
    "content",
    ["[" * 100_000, '{"weight_map": ' + '{"a": ' * 100_000, '{"weight_map": {"a": ' + "[" * 100_000],
    ids=["arrays", "objects", "inside-weight-map"],
)
def test_deeply_nested_index_is_one_error_not_a_recursion_error(tmp_path: Path, content: str) -> None:
    touch(tmp_path, "m.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(content)
    with pytest.raises(CheckpointError, match="malformed index: JSON nested too deeply") as info:
        discover(tmp_path)
    assert str(index) in str(info.value)


def test_over_large_index_is_refused_before_reading(tmp_path: Path) -> None:
    touch(tmp_path, "m.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    with open(index, "wb") as fh:  # sparse: nothing of it is read
        fh.truncate(MAX_INDEX_BYTES + 1)
    with pytest.raises(CheckpointError, match=f"larger than the {MAX_INDEX_BYTES}-byte cap") as info:
        read_index(index)
    assert str(index) in str(info.value)
