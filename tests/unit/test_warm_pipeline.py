"""The warm-pipeline ceiling: the page cache read into a ring of buffers and copied out, both at once.

On a GPU it copies to the device from pinned buffers; here, on a CPU device, the same loop copies into host memory,
which is what these tests drive: every byte read once, the ring reused, a failing read reported, not hung on.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ckptprof.probe import warm_pipeline
from ckptprof.probe.warm_pipeline import CHUNK_BYTES, measure_warm_pipeline, sample_chunks


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    out = []
    for i, size in enumerate((3 * CHUNK_BYTES // 2, 1000, CHUNK_BYTES)):
        path = tmp_path / f"model-{i}.safetensors"
        path.write_bytes(os.urandom(size))
        out.append(path)
    return out


def test_chunks_cover_the_sample_and_stop_at_the_cap(files: list[Path]) -> None:
    every = sample_chunks(files, cap=1 << 40)
    assert sum(length for _, _, length in every) == sum(p.stat().st_size for p in files)
    assert all(length <= CHUNK_BYTES for _, _, length in every)
    capped = sample_chunks(files, cap=CHUNK_BYTES + 10)
    assert sum(length for _, _, length in capped) == CHUNK_BYTES + 10
    assert {p for p, _, _ in capped} == {files[0]}


def test_a_cpu_device_measures_a_rate_over_every_byte(
    files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    real_preadv = os.preadv

    def counting_preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        n = real_preadv(fd, buffers, offset)
        read.append(n)
        return n

    monkeypatch.setattr(warm_pipeline.os, "preadv", counting_preadv)
    out = measure_warm_pipeline(files, "cpu", threads=3, repeats=2)
    total = sum(p.stat().st_size for p in files)
    assert out["notes"] == []
    assert out["warm_pipeline_sample_bytes"] == total
    assert out["warm_pipeline_threads"] == 3
    assert out["warm_pipeline_GBps"] is not None and out["warm_pipeline_GBps"] > 0
    assert sum(read) == 3 * total  # warming once, then two timed passes


def test_chunks_go_to_the_devices_in_turn_and_every_byte_is_copied(
    files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two devices (ranks spread over two GPUs; two CPU targets here)
    devices = [torch.device("cpu", 0), torch.device("cpu", 1)]
    assert [str(warm_pipeline.device_of_chunk(i, devices)) for i in range(4)] == ["cpu:0", "cpu:1"] * 2
    copied: dict[str, int] = {}
    real_copy = warm_pipeline._Target.copy

    def counting_copy(self: warm_pipeline._Target, buf: torch.Tensor, length: int) -> object:
        copied[str(self.device)] = copied.get(str(self.device), 0) + length
        return real_copy(self, buf, length)

    monkeypatch.setattr(warm_pipeline._Target, "copy", counting_copy)
    # WHEN the pipeline is measured over both
    out = measure_warm_pipeline(files, ["cpu:0", "cpu:1"], threads=2, repeats=1)
    # THEN it says so, and each device received its turn's chunks: together every byte of the sample, once
    chunks = sample_chunks(files, cap=1 << 40)
    expected = {"cpu:0": 0, "cpu:1": 0}
    for i, (_, _, length) in enumerate(chunks):
        expected[str(warm_pipeline.device_of_chunk(i, devices))] += length
    assert out["notes"] == [] and out["warm_pipeline_devices"] == 2
    assert copied == expected and sum(copied.values()) == out["warm_pipeline_sample_bytes"]


def test_a_failing_read_is_a_note_not_a_hang(files: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real_preadv = os.preadv

    def failing_preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        calls["n"] += 1
        if calls["n"] > len(sample_chunks(files, 1 << 40)):  # warming goes through, the timed pass fails
            raise OSError(5, "Input/output error")
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(warm_pipeline.os, "preadv", failing_preadv)
    out = measure_warm_pipeline(files, "cpu", threads=2, repeats=1)
    assert out["warm_pipeline_GBps"] is None
    assert len(out["notes"]) == 1 and "Input/output error" in out["notes"][0]


def test_nothing_to_read_measures_nothing(tmp_path: Path) -> None:
    out = measure_warm_pipeline([tmp_path / "missing.safetensors"], "cpu")
    assert out["warm_pipeline_GBps"] is None and out["notes"] == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_device_copies_from_pinned_buffers(files: list[Path]) -> None:
    out = measure_warm_pipeline(files, "cuda", threads=2, repeats=1)
    assert out["notes"] == [] and (out["warm_pipeline_GBps"] or 0) > 0
    if (
        torch.cuda.device_count() > 1
    ):  # ranks spread over two GPUs: the buffers go to both, each on its stream
        both = measure_warm_pipeline(files, ["cuda:0", "cuda:1"], threads=2, repeats=1)
        assert (
            both["notes"] == []
            and both["warm_pipeline_devices"] == 2
            and (both["warm_pipeline_GBps"] or 0) > 0
        )
