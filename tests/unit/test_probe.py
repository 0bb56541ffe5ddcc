"""The ceilings probe: sample selection, stream splitting, reads, timing, H2D helpers, device specs, the CLI."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.checkpoint import fs
from ckptprof.cli.main import main
from ckptprof.errors import UsageError
from ckptprof.probe import memcpy, parallel, run_probes, sampling, storage, transfer

MiB = 1024 * 1024
ALIGN = sampling.DIRECT_ALIGN


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="ckptprof-probe-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _files(root: Path, sizes: list[int], sparse: bool = False) -> list[Path]:
    paths = []
    for i, size in enumerate(sizes):
        p = root / f"model-{i + 1:05d}-of-{len(sizes):05d}.safetensors"
        if sparse:
            with open(p, "wb") as fh:
                fh.truncate(size)  # costs no disk: only sample selection looks at these
        else:
            p.write_bytes(os.urandom(size))
        paths.append(p)
    return paths


class StepClock:
    """A clock that advances a fixed step per reading: timed sections take exactly ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


# -- sample and streams ----------------------------------------------------------------------------------------


def test_sample_is_every_file_when_small(disk_dir: Path) -> None:
    paths = _files(disk_dir, [3 * MiB, 0, 5 * MiB + 7])
    regions = sampling.choose_sample(paths, 10**9)
    assert [(r.path, r.offset, r.length) for r in regions] == [
        (paths[0], 0, 3 * MiB),
        (paths[2], 0, 5 * MiB + 7),
    ]


def test_sample_of_a_huge_checkpoint_is_bounded_and_spread(disk_dir: Path) -> None:
    paths = _files(disk_dir, [5 * 10**9] * 64, sparse=True)  # 320 GB, sparse
    regions = sampling.choose_sample(paths, 2 * 10**9)
    total = sum(r.length for r in regions)
    assert 2 * 10**9 <= total < 2 * 10**9 + ALIGN
    files = {r.path for r in regions}
    assert len(files) == len(regions) > 8  # many files, not the first 2 GB of shard 1
    assert max(paths.index(p) for p in files) >= 56  # reaches the end of the list
    assert all(r.offset % ALIGN == 0 and r.length % ALIGN == 0 for r in regions)


def test_sample_tops_up_from_small_files(disk_dir: Path) -> None:
    paths = _files(disk_dir, [1 * MiB] * 10 + [400 * MiB], sparse=True)
    regions = sampling.choose_sample(paths, 300 * MiB)
    assert sum(r.length for r in regions) == 300 * MiB


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=50 * ALIGN + 17), min_size=1, max_size=12),
    n=st.integers(min_value=1, max_value=16),
)
def test_split_streams_covers_the_sample_exactly_once(lengths: list[int], n: int) -> None:
    regions = [sampling.Region(Path(f"/f{i}"), 0, length) for i, length in enumerate(lengths)]
    streams = sampling.split_streams(regions, n)
    assert 1 <= len(streams) <= n
    covered: dict[Path, list[tuple[int, int]]] = {}
    for stream in streams:
        for r in stream:
            assert r.length > 0
            assert r.offset % ALIGN == 0  # every cut is O_DIRECT-safe
            covered.setdefault(r.path, []).append((r.offset, r.offset + r.length))
    for region in regions:
        spans = sorted(covered[region.path])
        assert spans[0][0] == 0 and spans[-1][1] == region.length
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # contiguous, no overlap


def test_split_streams_balances_bytes() -> None:
    regions = [sampling.Region(Path(f"/f{i}"), 0, 100 * MiB) for i in range(3)]
    streams = sampling.split_streams(regions, 4)
    sizes = [sum(r.length for r in s) for s in streams]
    assert len(streams) == 4
    assert max(sizes) - min(sizes) <= 2 * ALIGN


# -- reading and timing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [False, True])
def test_read_regions_reads_every_byte(disk_dir: Path, direct: bool) -> None:
    paths = _files(disk_dir, [3 * MiB + 5, 2 * MiB])
    if direct and not storage.o_direct_support(paths[0])[0]:
        pytest.skip(f"O_DIRECT not supported on {fs.fs_type(paths[0])}")
    regions = sampling.choose_sample(paths, 10**9)
    buf = storage._aligned_buffer(1 * MiB)
    try:
        assert storage.read_regions(regions, 1 * MiB, direct, buf) == 5 * MiB + 5
    finally:
        buf.close()
    nbytes, _ = storage.read_streams(sampling.split_streams(regions, 3), 1 * MiB, direct)
    assert nbytes == 5 * MiB + 5


def test_timed_parallel_uses_the_injected_clock() -> None:
    jobs = [lambda: 10, lambda: 20, lambda: 30]
    assert parallel.timed_parallel(jobs, StepClock(0.5)) == (60, 0.5)
    assert parallel.timed_parallel(jobs[:1], StepClock(2.0)) == (10, 2.0)


def test_timed_parallel_reraises_a_worker_error() -> None:
    def boom() -> int:
        raise OSError(5, "EIO")

    with pytest.raises(OSError, match="EIO"):
        parallel.timed_parallel([lambda: 1, boom])


def test_ctrl_c_during_a_parallel_read_stops_the_readers_before_their_buffers_go(disk_dir: Path) -> None:
    # GIVEN four readers with 64 KiB blocks over 32 MiB each (thousands of preads)
    paths = _files(disk_dir, [32 * MiB] * 4)
    streams = sampling.split_streams(sampling.choose_sample(paths, 10**9), 4)
    before = threading.active_count()

    class InterruptAtStart:
        """Ctrl-C lands in the main thread just as the readers are released."""

        def __call__(self) -> float:
            raise KeyboardInterrupt

    # WHEN the interrupt comes while they read
    with pytest.raises(KeyboardInterrupt):
        storage.read_streams(streams, 64 * 1024, False, InterruptAtStart())
    # THEN the interrupt itself surfaces (not a BufferError from closing a buffer a reader still used), every
    # reader has stopped, and the next probe is not cancelled
    assert threading.active_count() == before
    assert not parallel.CANCEL.is_set()
    assert storage.read_streams(streams, 1 * MiB, False)[0] == 128 * MiB


def test_o_direct_refused_on_a_file_system_without_it(
    monkeypatch: pytest.MonkeyPatch, disk_dir: Path
) -> None:
    path = _files(disk_dir, [8192])[0]
    real_open = os.open

    def no_direct(p: object, flags: int, *a: object, **kw: object) -> int:
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument")
        return real_open(p, flags, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.os, "open", no_direct)
    works, why = storage.o_direct_support(path)
    assert not works and "EINVAL" in why
    result = storage.measure_storage([path], streams=2)
    assert result["storage_method"] in (storage.METHOD_BUFFERED_DROPPED, storage.METHOD_BUFFERED_NOT_DROPPED)
    assert any("O_DIRECT open refused" in n for n in result["notes"])


# -- the storage probe -----------------------------------------------------------------------------------------

STORAGE_KEYS = {
    "storage_read_GBps",
    "storage_read_1_stream_GBps",
    "storage_read_n_streams_GBps",
    "storage_streams",
    "storage_method",
    "storage_sample_bytes",
    "storage_cold_verified",
    "page_cache_read_GBps",
    "page_cache_read_1_thread_GBps",
    "fs_type",
    "notes",
}


@pytest.mark.parametrize("method", ["auto", "buffered"])
def test_measure_storage_on_disk(disk_dir: Path, method: str) -> None:
    paths = _files(disk_dir, [6 * MiB, 6 * MiB, 4 * MiB])
    result = storage.measure_storage(paths, sample_bytes=10**9, streams=3, block=1 * MiB, method=method)
    assert set(result) >= STORAGE_KEYS
    json.dumps(result)  # JSON-safe
    assert result["storage_sample_bytes"] == 16 * MiB
    assert result["storage_streams"] == 3
    assert result["fs_type"] == fs.fs_type(disk_dir)
    for key in ("storage_read_GBps", "storage_read_1_stream_GBps", "page_cache_read_GBps"):
        assert result[key] > 0
    assert result["storage_read_GBps"] == max(
        result["storage_read_1_stream_GBps"], result["storage_read_n_streams_GBps"]
    )
    if method == "buffered":
        assert result["storage_method"].startswith("buffered")
        assert result["storage_cold_verified"] == (
            result["storage_method"] == storage.METHOD_BUFFERED_DROPPED
        )
    elif storage.o_direct_support(paths[0])[0]:
        assert result["storage_method"] == storage.METHOD_O_DIRECT
        assert result["storage_cold_verified"] is True


def test_measure_storage_rates_follow_the_clock(disk_dir: Path) -> None:
    # GIVEN 8 MiB of checkpoint, less than twice the sample: the two cold reads take a disjoint half each
    paths = _files(disk_dir, [4 * MiB, 4 * MiB])
    result = storage.measure_storage(paths, streams=2, block=1 * MiB, clock=StepClock(0.25))
    half = round(4 * MiB / 0.25 / 1e9, 3)
    assert result["storage_read_1_stream_GBps"] == half
    assert result["storage_read_n_streams_GBps"] == half
    assert result["storage_sample_bytes"] == 8 * MiB  # every byte read cold once, none twice
    assert result["page_cache_read_1_thread_GBps"] == half  # the warm sample is the second half


def test_the_cold_reads_take_disjoint_halves_of_the_sample(disk_dir: Path) -> None:
    # A second read of the same bytes could come from a cache the first filled (a drive's, an NFS server's).
    paths = _files(disk_dir, [3 * MiB, 5 * MiB, 1 * MiB + 4096], sparse=True)
    first, second = sampling.disjoint_halves(sampling.choose_sample(paths, 10**9))
    covered = [(r.path, b) for r in first + second for b in range(r.offset, r.offset + r.length, 4096)]
    assert len(covered) == len(set(covered))  # nothing read twice
    assert sum(r.length for r in first + second) == 9 * MiB + 4096
    assert abs(sum(r.length for r in first) - sum(r.length for r in second)) <= 4096
    # a sample too small to cut is used whole by both reads
    (disk_dir / "tiny").mkdir()
    (tiny,) = _files(disk_dir / "tiny", [100])
    small = sampling.choose_sample([tiny], 10**9)
    assert sampling.disjoint_halves(small) == (small, small)


def test_measure_storage_on_tmpfs_says_it_is_memory() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or fs.fs_type(shm) != "tmpfs" or not os.access(shm, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm")
    d = Path(tempfile.mkdtemp(dir=shm))
    try:
        paths = _files(d, [2 * MiB])
        result = storage.measure_storage(paths, streams=2, block=1 * MiB, method="buffered")
        assert result["storage_method"] == storage.METHOD_BUFFERED_NOT_DROPPED
        assert result["storage_cold_verified"] is False
        assert any("memory" in n for n in result["notes"])
    finally:
        shutil.rmtree(d)


def test_measure_storage_of_nothing() -> None:
    result = storage.measure_storage([], streams=2)
    assert result["storage_read_GBps"] is None
    assert result["notes"]


def test_unknown_method_is_refused(disk_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown storage probe method"):
        storage.measure_storage(_files(disk_dir, [8192]), method="mmap")


def test_memcpy() -> None:
    result = memcpy.measure_memcpy(nbytes=8 * MiB, repeats=2, threads=2)
    assert result["memcpy_GBps"] > 0 and result["memcpy_n_threads_GBps"] > 0
    assert result["memcpy_threads"] == 2
    assert result["fresh_write_GBps"] > 0 and result["fresh_write_n_threads_GBps"] > 0
    clocked = memcpy.measure_memcpy(nbytes=1 * MiB, repeats=3, threads=1, clock=StepClock(1.0))
    assert clocked["memcpy_GBps"] == round(1 * MiB / 1e9, 3)


# -- transfer helpers (the CUDA path itself needs a GPU) -------------------------------------------------------


def test_median_rate_ignores_one_slow_repeat() -> None:
    assert transfer.median_rate(10**9, [0.1, 0.1, 5.0]) == pytest.approx(10.0)
    assert transfer.median_rate(10**9, []) == 0.0
    assert transfer.median_rate(10**9, [0.0]) == 0.0


def test_aggregate_rate_spans_first_start_to_last_end() -> None:
    # Two devices, 1 GB each; rounds of 0.1 s, 0.2 s and 0.1 s across both devices.
    rounds = [
        [(0.0, 0.08), (0.01, 0.1)],
        [(1.0, 1.2), (1.0, 1.1)],
        [(2.0, 2.1), (2.05, 2.1)],
    ]
    assert transfer.aggregate_rate(10**9, rounds) == pytest.approx(20.0)
    assert transfer.aggregate_rate(10**9, []) == 0.0


def test_transfer_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "_cuda_available", lambda: False)
    for devices in (["cpu"], ["cuda:0"], []):
        result = transfer.measure_transfer(devices)
        assert result["h2d_pageable_GBps"] == {}
        assert result["h2d_pinned_GBps"] == {}
        assert result["d2h_pinned_GBps"] == {}
        assert result["h2d_pinned_all_devices_GBps"] is None
        assert result["notes"] == [transfer.NO_CUDA_NOTE]


def test_cuda_devices_filter() -> None:
    assert transfer.cuda_devices(["cpu", "cuda:0", "cuda:3"]) == ["cuda:0", "cuda:3"]


# -- device specs, merged ceilings, CLI ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cpu", ["cpu"]),
        ("cuda", [f"cuda:{i}" for i in range(8)]),
        ("cuda:0-7", [f"cuda:{i}" for i in range(8)]),
        ("cuda:2-3", ["cuda:2", "cuda:3"]),
        ("0,1", ["cuda:0", "cuda:1"]),
        ("cuda:3,1,3", ["cuda:3", "cuda:1"]),
        ("4-5,0", ["cuda:4", "cuda:5", "cuda:0"]),
    ],
)
def test_parse_device_spec(spec: str, expected: list[str]) -> None:
    assert run_probes.parse_device_spec(spec, visible_cuda=8) == expected


@pytest.mark.parametrize(
    ("spec", "visible", "message"),
    [
        ("cuda", 0, "no CUDA device"),
        ("cuda:8", 8, "cuda:8 does not exist"),
        ("0-9", 2, "does not exist"),
        ("7-3", 8, "is empty"),
        ("gpu0", 8, "expected"),
        ("cuda:", 8, "expected"),
    ],
)
def test_parse_device_spec_errors(spec: str, visible: int, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run_probes.parse_device_spec(spec, visible_cuda=visible)


def test_measure_ceilings_merges_everything(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "_cuda_available", lambda: False)
    paths = _files(disk_dir, [2 * MiB, 2 * MiB])
    result = run_probes.measure_ceilings(paths, ["cpu"], sample_bytes=10**9, streams=2, progress=False)
    assert set(result) >= STORAGE_KEYS | {"memcpy_GBps", "h2d_pinned_GBps", "h2d_pageable_GBps", "probe_s"}
    assert transfer.NO_CUDA_NOTE in result["notes"]
    json.dumps(result)

    bare = run_probes.measure_ceilings([], ["cpu"], progress=False)
    assert bare["storage_read_GBps"] is None and bare["memcpy_GBps"] > 0
    assert any("no checkpoint path" in n for n in bare["notes"])


def test_cli_probe_json(disk_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _files(disk_dir, [2 * MiB, 3 * MiB])
    rc = main(["probe", str(disk_dir), "--devices", "cpu", "--json", "-q", "--streams", "2"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    data = json.loads(out.out)
    assert data["storage_sample_bytes"] == 5 * MiB
    assert data["storage_streams"] == 2
    assert out.err == ""


def test_cli_probe_table(disk_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (path,) = _files(disk_dir, [2 * MiB])
    rc = main(["probe", str(path), "--devices", "cpu", "--sample", "1MiB", "--streams", "2"])
    out = capsys.readouterr()
    assert rc == 0
    assert "storage read, cold (best)" in out.out and "page-cache read" in out.out
    assert "ckptprof probe:" in out.err  # progress goes to stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["probe", "/no/such/ckpt"], "/no/such/ckpt: no such file or directory"),
        (["probe", "--sample", "lots"], "--sample"),
        (["probe", "--streams", "0"], "--streams"),
        (["probe", "--devices", "cuda:0-1x"], "--devices"),
    ],
)
def test_cli_probe_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_probe_empty_dir(disk_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", str(disk_dir)]) == 2
    assert str(disk_dir) in capsys.readouterr().err


def test_render_text_with_gpus() -> None:
    from ckptprof.cli.probe_cmd import render_text

    ceilings = {
        **storage.empty_storage_result(),
        "memcpy_GBps": 10.0,
        "memcpy_n_threads_GBps": 20.0,
        "memcpy_threads": 8,
        "memcpy_bytes": 256 * MiB,
        "h2d_pageable_GBps": {"cuda:0": 8.7, "cuda:1": 8.6},
        "h2d_pinned_GBps": {"cuda:0": 55.2, "cuda:1": 55.0},
        "d2h_pinned_GBps": {"cuda:0": 55.5, "cuda:1": 55.4},
        "h2d_pinned_all_devices_GBps": 110.0,
        "h2d_pageable_all_devices_GBps": 17.0,
        "h2d_transfer_bytes": 256 * MiB,
        "notes": ["a note"],
    }
    text = render_text(ceilings)
    assert "H2D pinned cuda:1" in text and "55.00 GB/s" in text
    assert "110.00 GB/s" in text and "note: a note" in text
    assert "storage read" not in text  # no path given: no storage rows


def test_cli_probe_read_error_is_one_line(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (path,) = _files(disk_dir, [8192])

    def failing(*args: object, **kwargs: object) -> dict[str, object]:
        raise OSError(5, "Input/output error", str(path))

    monkeypatch.setattr(run_probes, "measure_ceilings", failing)
    assert main(["probe", str(path), "--devices", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: read failed: Input/output error" in err and len(err.strip().splitlines()) == 1
