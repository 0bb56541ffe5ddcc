from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from ckptprof.loader.touch import PAGE, segments, touch_offsets, touch_pages


def test_contiguous_tensor_is_one_run() -> None:
    t = torch.zeros(100, 64, dtype=torch.bfloat16)
    starts, run = segments(t)
    assert list(starts) == [t.data_ptr()] and run == 100 * 64 * 2


def test_row_parallel_narrow_gives_one_run_per_row() -> None:
    full = torch.zeros(10, 1000, dtype=torch.float32)
    part = full.narrow(1, 250, 250)
    starts, run = segments(part)
    assert run == 250 * 4
    assert list(starts) == [full.data_ptr() + (r * 1000 + 250) * 4 for r in range(10)]


def test_offsets_hit_every_page_of_every_run() -> None:
    starts = np.array([0, 3 * PAGE + 100], dtype=np.int64)
    run = 2 * PAGE + 10
    pages = set((touch_offsets(starts, run) // PAGE).tolist())
    expected = {p for s in starts for p in range(s // PAGE, (s + run - 1) // PAGE + 1)}
    assert pages == expected


def test_touch_pages_faults_in_an_anonymous_mapping() -> None:
    # A fresh private mapping has no pages; touching a strided view must make exactly those pages resident.
    size = 64 * PAGE
    buf = mmap.mmap(-1, size)
    t = torch.frombuffer(buf, dtype=torch.uint8).view(64, PAGE)
    view = t.narrow(1, 0, 16)[::2]  # every other row, 16 bytes each
    assert touch_pages(view) == 32
    del t, view
    buf.close()


def test_narrowed_copy_equals_source() -> None:
    full = torch.randn(16, 32)
    part = full.narrow(0, 4, 4)
    touch_pages(part)
    assert torch.equal(part.clone(), full[4:8])


@pytest.fixture
def fault_in_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    from ckptprof.loader.touch import fault_in_method

    fault_in_method.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    fault_in_method.cache_clear()


@pytest.mark.parametrize("method", ["populate", "touch"])
def test_fault_in_brings_a_cold_file_slice_into_the_page_cache(
    tmp_path: Path, method: str, fault_in_env: pytest.MonkeyPatch
) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    from ckptprof.checkpoint import fs
    from ckptprof.loader.touch import fault_in, fault_in_method

    fault_in_env.setenv("CKPTPROF_FAULT_IN", method)
    assert fault_in_method() == method

    path = tmp_path / "w.safetensors"
    # 64 MiB, 4 pages per row: large enough that the slice lies past the readahead that opening the file
    # triggers (8 MiB on some virtual disks)
    full = torch.randn(4096, 4096)
    save_file({"w": full}, str(path))
    dropped = fs.drop_cache([path])
    if not dropped.ok:
        pytest.skip(f"cannot drop the page cache here: {dropped.note}")
    with safe_open(str(path), framework="pt") as h:
        t = h.get_tensor("w")
        before = fs.resident_bytes(path)
        fault_in(t.narrow(0, 2048, 128))  # a column-parallel slice: rows 2048..2175, 2 MiB
        after = fs.resident_bytes(path)
        assert after - before >= 2 * 1024 * 1024
        assert after < 0.9 * path.stat().st_size  # only around the slice, not the whole file
        assert torch.equal(t.narrow(0, 2048, 128), full[2048:2176])


def test_an_unknown_fault_in_method_is_a_clear_error(fault_in_env: pytest.MonkeyPatch) -> None:
    from ckptprof.loader.touch import fault_in

    fault_in_env.setenv("CKPTPROF_FAULT_IN", "mmap-magic")
    with pytest.raises(ValueError, match="CKPTPROF_FAULT_IN must be one of populate, touch"):
        fault_in(torch.ones(4096, dtype=torch.uint8))
