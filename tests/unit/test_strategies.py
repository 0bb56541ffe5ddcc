"""Loading strategies: each loads the same bytes as ``sglang``; the recorder's concurrent API; the comparison."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import itertools
import os
import re
import shutil
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from ckptprof.analysis.strategies import compare_strategies, floor_seconds, strategy_label
from ckptprof.checkpoint import fs
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import ModelPlan, plan_model
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.loader.strategies import (
    AVAILABLE,
    FLAGS,
    PARAMS,
    StrategyUnavailable,
    get_strategy,
    param_digests,
    parse_spec,
)
from ckptprof.loader.strategies import fastsafetensors as fst_mod
from ckptprof.loader.strategies import pipelined as pipelined_mod
from ckptprof.loader.strategies import runai as runai_mod
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardTiming

# -- helpers ---------------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 10.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class ThreadCounters:
    """Per-thread fake counters (what RUSAGE_THREAD and /proc/thread-self/io give), plus process totals."""

    def __init__(self) -> None:
        self.faults: dict[int, int] = {}
        self.storage: dict[int, int] = {}

    def bump(self, faults: int, storage: int) -> None:
        me = threading.get_ident()
        self.faults[me] = self.faults.get(me, 0) + faults
        self.storage[me] = self.storage.get(me, 0) + storage

    def major_faults(self) -> int:
        return sum(self.faults.values())

    def storage_read_bytes(self) -> int:
        return sum(self.storage.values())

    def thread_major_faults(self) -> int:
        return self.faults.get(threading.get_ident(), 0)

    def thread_storage_read_bytes(self) -> int:
        return self.storage.get(threading.get_ident(), 0)


def fake_recorder() -> tuple[Recorder, FakeClock, ThreadCounters]:
    clock = FakeClock()
    counters = ThreadCounters()
    rec = Recorder(copy_timer=HostCopyTimer(clock), counters=counters, clock=clock)
    rec.start()
    return rec, clock, counters


def in_thread(fn: Any) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


# -- the recorder's concurrent API ------------------------------------------------------------------------------


def test_explicit_shard_takes_phases_from_several_threads_and_spans_first_to_last_event() -> None:
    rec, clock, counters = fake_recorder()
    with rec.model("draft") as rm:
        clock.advance(1.0)
        shard = rec.open_shard("a.safetensors", nonresident_bytes=10)
        clock.advance(0.5)  # queued: not part of the shard's wall

        def worker() -> None:
            with rec.deserialize(shard=shard):
                clock.advance(0.2)
            with rec.read(100, shard=shard):
                clock.advance(1.0)
                counters.bump(faults=3, storage=4096)

        in_thread(worker)
        with rec.h2d(40, shard=shard):
            clock.advance(0.3)
        rec.tensor_done(shard=shard)
        clock.advance(2.0)  # idle before the close: not part of the wall either
        rec.close_shard(shard)
    (t,) = rm.shards
    assert (t.deserialize_s, t.read_s, t.h2d_s) == pytest.approx((0.2, 1.0, 0.3))
    assert t.start_s == pytest.approx(1.5)
    assert t.wall_s == pytest.approx(1.5)
    assert (t.bytes, t.h2d_bytes, t.tensors, t.nonresident_bytes) == (100, 40, 1, 10)
    assert (t.major_faults, t.storage_bytes) == (3, 4096)
    assert rm.wall_s == pytest.approx(5.0)  # the model's wall is the rank's real wall


def test_concurrent_shards_keep_their_own_thread_counters() -> None:
    rec, _, counters = fake_recorder()
    with rec.model("target") as rm:
        a = rec.open_shard("a")
        b = rec.open_shard("b")
        go = threading.Barrier(2)

        def reader(shard: ShardTiming, faults: int) -> None:
            go.wait()
            for _ in range(200):
                with rec.read(1, shard=shard):
                    counters.bump(faults=faults, storage=faults * 10)

        threads = [threading.Thread(target=reader, args=(s, f)) for s, f in ((a, 1), (b, 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rec.close_shard(a)
        rec.close_shard(b)
    got = {s.file: (s.bytes, s.major_faults, s.storage_bytes) for s in rm.shards}
    assert got == {"a": (200, 200, 2000), "b": (200, 400, 4000)}


def test_context_shard_counts_its_thread_and_a_helper_thread_per_phase() -> None:
    rec, _, counters = fake_recorder()
    with rec.model("target") as rm, rec.shard("s") as shard:
        counters.bump(faults=5, storage=500)  # the owning thread, outside any phase: still its shard's

        def background() -> None:
            counters.bump(faults=100, storage=10_000)  # not inside a phase of s: not s's
            with rec.read(7, shard=shard):
                counters.bump(faults=1, storage=1000)

        in_thread(background)
    (t,) = rm.shards
    assert (t.major_faults, t.storage_bytes, t.bytes) == (6, 1500, 7)


def test_process_counters_for_a_library_that_reads_on_its_own_threads() -> None:
    rec, _, counters = fake_recorder()
    with rec.model("target") as rm:
        shard = rec.open_shard("s")
        with rec.read(10, shard=shard, process=True):
            in_thread(lambda: counters.bump(faults=2, storage=2048))
        rec.close_shard(shard)
    assert (rm.shards[0].major_faults, rm.shards[0].storage_bytes) == (2, 2048)


def test_use_shard_routes_plain_phases_and_close_marks_failures() -> None:
    rec, clock, _ = fake_recorder()
    done: list[str] = []
    rec.on_shard_done = lambda role, t: done.append(f"{role}:{t.file}:{t.status}")
    with rec.model("draft") as rm:
        shard = rec.open_shard("x")
        with rec.use_shard(shard), rec.read(5):
            clock.advance(0.1)
        rec.close_shard(shard, ValueError("bad"))
        rec.close_shard(shard)  # closing twice is harmless
        with pytest.raises(RuntimeError, match="not open"), rec.read(1, shard=shard):
            pass
    (t,) = rm.shards
    assert (t.bytes, t.read_s, t.status, t.error) == (5, pytest.approx(0.1), "failed", "ValueError: bad")
    assert done == ["draft:x:failed"]


def test_use_shard_counts_the_threads_block_once_not_per_phase() -> None:
    rec, _, counters = fake_recorder()
    with rec.model("target") as rm:
        shard = rec.open_shard("s")

        def consumer() -> None:
            with rec.use_shard(shard):
                counters.bump(faults=2, storage=20)  # between phases: still this shard's
                with rec.read(3):
                    counters.bump(faults=1, storage=10)
            counters.bump(faults=50, storage=500)  # after the block: not this shard's

        in_thread(consumer)
        rec.close_shard(shard)
    assert (rm.shards[0].major_faults, rm.shards[0].storage_bytes, rm.shards[0].bytes) == (3, 30, 3)


def test_open_shard_outside_a_model_is_a_bug() -> None:
    rec, _, _ = fake_recorder()
    with pytest.raises(RuntimeError):
        rec.open_shard("x")


# -- the registry -----------------------------------------------------------------------------------------------


def test_registry_names_flags_and_params() -> None:
    assert set(AVAILABLE) == {
        "sglang",
        "sglang-mt",
        "sglang-mt-completed",
        "no-mmap",
        "prefetch",
        "pipelined",
        "pipelined-shared",
        "fastsafetensors",
        "runai-streamer",
        "instanttensor",
        "safetensors-pread",
        "vllm",
        "vllm-eager",
        "vllm-prefetch",
        "vllm-mt",
    }
    assert FLAGS["vllm-eager"] == "--safetensors-load-strategy eager"
    assert FLAGS["vllm-prefetch"] == "--safetensors-load-strategy prefetch"
    assert PARAMS["vllm-prefetch"] == {"num_threads": 8, "block_mib": 16, "shuffle": False}
    assert PARAMS["vllm-mt"] == {"num_threads": 8, "shuffle": False}
    assert PARAMS["vllm"] == PARAMS["vllm-eager"] == {"shuffle": False}
    assert FLAGS["pipelined-shared"].startswith("not an SGLang flag")
    assert PARAMS["pipelined-shared"] == {"readers": None, "chunk_mib": 64.0, "direct": "auto", "slots": None}
    assert "enable_multithread_load" in FLAGS["sglang-mt"] and '"num_threads": 8' in FLAGS["sglang-mt"]
    assert '"num_threads": 16' in get_strategy("sglang-mt", num_threads=16).flags
    assert FLAGS["no-mmap"] == "--weight-loader-disable-mmap"
    assert FLAGS["prefetch"].startswith("--weight-loader-prefetch-checkpoints")
    assert FLAGS["fastsafetensors"] == "--load-format fastsafetensors"
    assert FLAGS["runai-streamer"] == "--load-format runai_streamer"
    assert get_strategy("runai-streamer", concurrency=32).flags == (
        "--load-format runai_streamer --model-loader-extra-config '{\"concurrency\": 32}'"
    )
    assert FLAGS["instanttensor"] == "--load-format instanttensor"
    assert '"backend": "AIO"' in get_strategy("instanttensor", backend="aio").flags
    assert FLAGS["pipelined"].startswith("not an SGLang flag")
    assert PARAMS["pipelined"]["readers"] is None and PARAMS["prefetch"]["num_threads"] == 4  # None: per TP
    assert [pipelined_mod.default_readers(tp) for tp in (1, 2, 4, 8, 16)] == [16, 16, 8, 4, 4]
    assert parse_spec("sglang-mt:num_threads=16") == ("sglang-mt", {"num_threads": 16})
    assert parse_spec("pipelined:direct=never:chunk_mib=8") == (
        "pipelined",
        {"direct": "never", "chunk_mib": 8},
    )
    with pytest.raises(ValueError, match="unknown strategy"):
        get_strategy("nope")
    with pytest.raises(ValueError, match="no parameter threads"):
        parse_spec("sglang-mt:threads=4")
    with pytest.raises(ValueError, match="expected NAME:key=value"):
        parse_spec("pipelined:8")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pipelined:readers=x", "readers='x' is not an int"),
        ("pipelined:readers=true", "readers=True is not an int"),  # a bool is no count
        ("sglang:read_ahead=1", "read_ahead=1 is not a bool"),
        ("pipelined:direct=3", "direct=3 is not a str"),
        ("fastsafetensors:nogds=2", "nogds=2 is not a bool"),
    ],
)
def test_a_parameter_of_the_wrong_kind_is_refused_by_name(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_spec(spec)


def test_parameters_of_the_right_kind_pass() -> None:
    assert parse_spec("pipelined:readers=4:direct=never") == ("pipelined", {"readers": 4, "direct": "never"})
    assert parse_spec("sglang:read_ahead=true") == ("sglang", {"read_ahead": True})
    assert get_strategy("pipelined", readers=None).name == "pipelined"  # None: the per-TP default


def test_the_command_line_names_the_item_a_strategy_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckptprof.cli.main import main

    # Refused before the built-in checkpoint is generated: a typo must not cost a 512 MB write first.
    monkeypatch.setenv("CKPTPROF_CACHE", str(tmp_path / "cache"))
    assert main(["run", "--strategy", "sglang,sglang:block_mib=0", "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert "--strategy 'sglang:block_mib=0': block_mib and depth must be at least 1" in err
    assert main(["run", "--strategy", "pipelined:readers=x", "--no-probe"]) == 2
    assert "--strategy: strategy 'pipelined': readers='x' is not an int" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


# -- every strategy loads the same bytes ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(small_verifier: Path, small_draft: Path) -> list[ModelPlan]:
    return [plan_model("target", small_verifier), plan_model("draft", small_draft)]


def load(
    models: list[ModelPlan], name: str, params: dict[str, Any], tp: int, rank: int, cache: str = "warm"
) -> tuple[dict[str, str], Recorder]:
    files = [f for m in models for f in m.files]
    if cache == "cold":
        fs.drop_cache(files)
    elif cache == "warm":
        fs.warm_cache(files)
    ctx = LoadContext(rank=rank, tp=tp, device=torch.device("cpu"))
    for m in models:
        ctx.allocate(m)
    rec = Recorder(copy_timer=HostCopyTimer())
    strategy = get_strategy(name, **params)
    rec.start()
    for m in models:
        with rec.model(m.role):
            strategy.load_model(ctx, m, rec)
    strategy.close()
    return param_digests(ctx), rec


_REFERENCE: dict[tuple[int, int], dict[str, str]] = {}


def reference(models: list[ModelPlan], tp: int, rank: int) -> dict[str, str]:
    if (tp, rank) not in _REFERENCE:
        _REFERENCE[(tp, rank)] = load(models, "sglang", {}, tp, rank)[0]
    return _REFERENCE[(tp, rank)]


BASE = ("sglang-mt", "sglang-mt-completed", "no-mmap", "prefetch", "pipelined", "safetensors-pread")
CASES: list[tuple[str, dict[str, Any], int, str]] = [
    *[(name, {}, tp, cache) for name in BASE for tp in (1, 3) for cache in ("warm", "cold")],
    # small chunks split tensors across requests; a zero threshold reads row-parallel slices row by row
    ("pipelined", {"chunk_mib": 1, "row_read_min_skip": 0, "readers": 3}, 3, "warm"),
    # O_DIRECT on every file (auto picks it only for a cold TP1 load)
    ("pipelined", {"direct": "always", "chunk_mib": 2}, 1, "cold"),
    ("pipelined", {"direct": "always", "chunk_mib": 2}, 3, "cold"),
    ("sglang-mt", {"num_threads": 2}, 3, "warm"),
    ("prefetch", {"num_threads": 1, "block_mib": 1}, 3, "cold"),
    # vLLM's paths (ckptprof/loader/strategies/vllm.py)
    *[
        (name, {}, tp, cache)
        for name in ("vllm", "vllm-eager", "vllm-prefetch", "vllm-mt")
        for tp in (1, 3)
        for cache in ("warm", "cold")
    ],
    ("vllm-prefetch", {"num_threads": 2, "block_mib": 1}, 3, "cold"),
    ("vllm-mt", {"num_threads": 2}, 1, "cold"),
    # one rank alone reads every chunk itself (TP > 1 needs rank processes: tests/integration/test_shared_reads.py)
    ("pipelined-shared", {"chunk_mib": 0.5, "readers": 2}, 1, "warm"),
    ("pipelined-shared", {"direct": "always"}, 1, "cold"),
]


@pytest.mark.parametrize(
    ("name", "params", "tp", "cache"),
    CASES,
    ids=[
        f"{n}{'-' + '-'.join(f'{k}={v}' for k, v in p.items()) if p else ''}-tp{tp}-{c}"
        for n, p, tp, c in CASES
    ],
)
def test_strategy_loads_the_same_bytes_as_sglang(
    models: list[ModelPlan], name: str, params: dict[str, Any], tp: int, cache: str
) -> None:
    for rank in range(tp):
        refs = reference(models, tp, rank)
        # The first rank meets the asked-for cache; the others, like ranks of one node, find what it left.
        digests, rec = load(models, name, params, tp, rank, cache if rank == 0 else "as-is")
        assert digests == refs, f"{name} {params} rank {rank}"
        for model, rm in zip(models, rec.models, strict=True):
            assert sorted(s.file for s in rm.shards) == sorted(s.name for s in model.shards)
            assert all(s.status == "ok" for s in rm.shards), [s.error for s in rm.shards]
            assert sum(s.h2d_bytes for s in rm.shards) > 0
            assert sum(s.bytes for s in rm.shards) > 0


@pytest.mark.parametrize("name", AVAILABLE)
def test_a_corrupt_shard_fails_alone(small_draft: Path, tmp_path: Path, name: str) -> None:
    if name == "fastsafetensors" and fst_mod.load_package() is None:
        pytest.skip("fastsafetensors is not installed")
    if name == "runai-streamer" and runai_mod.load_package() is None:
        pytest.skip("runai-model-streamer is not installed")
    if name == "instanttensor":
        pytest.skip("instanttensor loads to CUDA devices only (tests/gpu)")
    ckpt = tmp_path / "c"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[2]
    victim.write_bytes(struct.pack("<Q", 2**40) + victim.read_bytes()[8:])
    model = plan_model("draft", ckpt)
    _, rec = load([model], name, {}, 1, 0, "as-is")
    by_status = {s.file: s.status for s in rec.models[0].shards}
    assert by_status.pop(victim.name) == "failed"
    assert set(by_status.values()) == {"ok"} and len(by_status) == len(model.shards) - 1


def test_mt_newer_variant_hands_files_over_in_submission_order(models: list[ModelPlan]) -> None:
    _, rec = load(models, "sglang-mt", {"num_threads": 3}, 1, 0)
    for model, rm in zip(models, rec.models, strict=True):
        assert [s.file for s in rm.shards] == [s.name for s in model.shards]


def test_pipelined_reads_only_its_slices(models: list[ModelPlan]) -> None:
    # A TP3 rank reads about a third of the column-parallel bytes; sglang materialises every full tensor.
    _, sg = load(models, "sglang", {}, 3, 1)
    _, pl = load(models, "pipelined", {}, 3, 1)
    sg_bytes = sum(s.bytes for m in sg.models for s in m.shards)
    pl_bytes = sum(s.bytes for m in pl.models for s in m.shards)
    assert pl_bytes < 0.75 * sg_bytes


def test_prefetch_reads_the_ranks_share_of_the_sorted_files(
    models: list[ModelPlan], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckptprof.loader.strategies.prefetch import SGLangPrefetch

    # The prefetcher stops when the rank's own load is done; on a busy machine it may not have read a byte by
    # then. So the foreground here waits until the prefetcher has read one file of its share.
    one_read = threading.Event()
    real_read_file, real_foreground = SGLangPrefetch._read_file, SGLangPrefetch._foreground

    def read_file(self: SGLangPrefetch, *args: Any) -> None:
        try:
            real_read_file(self, *args)
        finally:
            one_read.set()

    def foreground(self: SGLangPrefetch, *args: Any) -> None:
        assert one_read.wait(60), "the prefetcher read nothing in 60 s"
        real_foreground(self, *args)

    monkeypatch.setattr(SGLangPrefetch, "_read_file", read_file)
    monkeypatch.setattr(SGLangPrefetch, "_foreground", foreground)
    draft = models[1]
    _, mmap = load([draft], "sglang", {}, 3, 1)
    _, pre = load([draft], "prefetch", {}, 3, 1)
    share = {Path(p).name for p in sorted(str(f) for f in draft.files)[1::3]}
    fg = {s.file: s.bytes for s in mmap.models[0].shards}
    prefetched = 0
    for s in pre.models[0].shards:
        size = next(p.bytes for p in draft.shards if p.name == s.file)
        # The prefetcher reads only this rank's share, each file at most once. It stops when the rank's own load
        # is done, so on a busy machine it may not have reached the last files of its share: never more, maybe less.
        assert fg[s.file] <= s.bytes <= fg[s.file] + (size if s.file in share else 0), s.file
        prefetched += s.bytes - fg[s.file]
    assert prefetched > 0


def test_pipelined_falls_back_to_buffered_reads_when_direct_io_is_refused(
    models: list[ModelPlan], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open, real_preadv = os.open, os.preadv
    o_direct = getattr(os, "O_DIRECT", 0)

    def open_refusing_half(path: Any, flags: int, *args: Any) -> int:
        fd = real_open(path, flags, *args)
        if flags & o_direct and str(path).endswith(("1.safetensors", "3.safetensors")):
            os.close(fd)
            raise OSError(errno.EINVAL, "O_DIRECT refused at open")
        return fd

    def preadv_refusing_direct(fd: int, buffers: Any, offset: int) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & o_direct:
            raise OSError(errno.EINVAL, "O_DIRECT refused at read")
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(pipelined_mod.os, "open", open_refusing_half)
    monkeypatch.setattr(pipelined_mod.os, "preadv", preadv_refusing_direct)
    digests, rec = load(models, "pipelined", {"direct": "always", "readers": 2}, 1, 0)
    assert digests == reference(models, 1, 0)
    assert all(s.status == "ok" for m in rec.models for s in m.shards)


def test_fastsafetensors_unavailable_says_how_to_install(
    models: list[ModelPlan], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fst_mod, "load_package", lambda: None)
    with pytest.raises(
        StrategyUnavailable, match=r"^fastsafetensors is not installed \(pip install fastsafetensors\)$"
    ):
        load(models, "fastsafetensors", {}, 1, 0)


def test_fastsafetensors_when_installed_loads_the_same_bytes(models: list[ModelPlan]) -> None:
    if fst_mod.load_package() is None:
        pytest.skip("fastsafetensors is not installed: the unavailable path is tested instead")
    digests, rec = load(models, "fastsafetensors", {}, 1, 0)
    assert digests == reference(models, 1, 0)
    shards = [s for m in rec.models for s in m.shards]
    assert all(s.status == "ok" for s in shards) and sum(s.bytes for s in shards) > 0


def test_peers_names_every_other_loader_beside_pipelined() -> None:
    from ckptprof.run.policy import parse_strategies

    specs = parse_strategies("peers", verify=True)
    assert specs[0] == ("sglang", {})  # --verify's reference
    assert [name for name, _ in specs[1:]] == [
        "pipelined",
        "safetensors-pread",
        "fastsafetensors",
        "runai-streamer",
        "instanttensor",
        "instanttensor",
    ]
    assert specs[-1][1] == {"backend": "BUFFERED"}


def test_runai_streamer_unavailable_says_how_to_install(
    models: list[ModelPlan], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runai_mod, "load_package", lambda: None)
    with pytest.raises(StrategyUnavailable, match=r"^runai-model-streamer is not installed \(pip install"):
        load(models, "runai-streamer", {}, 1, 0)


# 12 MiB: above the largest tensor (9 MiB), below each model's size, so the streamer's ring is reused
@pytest.mark.parametrize(("tp", "params"), [(1, {}), (3, {"concurrency": 2, "memory_limit": 12 * 2**20})])
def test_runai_streamer_when_installed_loads_the_same_bytes(
    models: list[ModelPlan], tp: int, params: dict[str, Any]
) -> None:
    if runai_mod.load_package() is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs runai-model-streamer: the real package's path must run there")
        pytest.skip("runai-model-streamer is not installed: the unavailable path is tested instead")
    before = {
        key: os.environ.get(key) for key in ("RUNAI_STREAMER_CONCURRENCY", "RUNAI_STREAMER_MEMORY_LIMIT")
    }
    for rank in range(tp):
        digests, rec = load(models, "runai-streamer", params, tp, rank)
        assert digests == reference(models, tp, rank)
        for model, rm in zip(models, rec.models, strict=True):
            assert sorted(s.file for s in rm.shards) == sorted(s.name for s in model.shards)
            assert all(s.status == "ok" for s in rm.shards), [s.error for s in rm.shards]
            # every tensor's wait is booked on its own file, and every file's bytes were counted
            assert sum(s.tensors for s in rm.shards) == sum(len(s.tensors or {}) for s in model.shards)
            assert all(s.bytes > 0 and s.read_s > 0 for s in rm.shards if s.tensors)
    # the extra config's environment is the load's only
    assert {key: os.environ.get(key) for key in before} == before


def test_runai_streamer_counts_the_storage_bytes_its_threads_read_ahead(models: list[ModelPlan]) -> None:
    # The streamer reads ahead while the rank copies: bytes read outside the rank's waits count too.
    if runai_mod.load_package() is None:
        pytest.skip("runai-model-streamer is not installed")
    files = [f for m in models for f in m.files]
    total = sum(f.stat().st_size for f in files)
    drop = fs.drop_cache(files)
    if not drop.ok or fs.total_resident_bytes(files) > 0.05 * total:
        pytest.skip(f"the page cache could not be dropped here: {drop.note}")
    _, rec = load(models, "runai-streamer", {}, 1, 0, cache="as-is")
    counted = sum(s.storage_bytes for m in rec.models for s in m.shards)
    if counted == 0:
        pytest.skip("this file system's reads are not in the kernel's io accounting")
    assert counted >= 0.9 * total, (counted, total)


def test_runai_streamer_memory_limit_below_a_tensor_fails_the_shards_with_the_librarys_reason(
    models: list[ModelPlan],
) -> None:
    if runai_mod.load_package() is None:
        pytest.skip("runai-model-streamer is not installed")
    _, rec = load(models, "runai-streamer", {"memory_limit": 2**20}, 1, 0)
    shards = [s for m in rec.models for s in m.shards]
    assert shards and all(s.status == "failed" for s in shards)
    assert all("cannot be smaller than" in (s.error or "") for s in shards)


def test_instanttensor_needs_a_cuda_device(models: list[ModelPlan]) -> None:
    with pytest.raises(StrategyUnavailable, match="CUDA devices only"):
        load(models, "instanttensor", {}, 1, 0)


# -- the comparison ---------------------------------------------------------------------------------------------


def session(
    strategy: str,
    wall: float,
    checksums: dict[int, dict[str, str]] | None = None,
    error: str | None = None,
    storage: int = 0,
    cache: str = "cold",
) -> Session:
    ranks = []
    for rank in (0, 1):
        shard = ShardTiming(
            file="a", bytes=500, read_s=wall / 2, h2d_s=wall / 4, wall_s=wall, storage_bytes=storage
        )
        ranks.append(
            RankResult(
                rank=rank,
                device="cuda:0",
                status="failed" if error else "ok",
                error=error,
                models=[] if error else [RankModel(role="draft", wall_s=wall, shards=[shard])],
                param_bytes=250 * 10**6,
                checksums=None if checksums is None else checksums[rank],
            )
        )
    return Session(
        config={"strategy": strategy, "tp": 2, "cache": cache, "devices": ["cuda:0"]},
        models=[
            ModelInfo(role="draft", path="/c", fs_type="ext4", total_bytes=10**9, resident_bytes_before=0)
        ],
        ranks=ranks,
        ceilings=Ceilings.from_dict(
            {"storage_read_n_streams_GBps": 2.0, "h2d_pinned_GBps": {"cuda:0": 50.0}}
        ),
    )


SUMS = {0: {"draft/w": "aa", "draft/n": "bb"}, 1: {"draft/w": "cc", "draft/n": "bb"}}


def test_comparison_names_the_fastest_its_flags_and_the_floor() -> None:
    other = {0: SUMS[0], 1: {"draft/w": "XX", "draft/n": "bb"}}
    sessions = [
        session("sglang", 2.0, SUMS),
        session("sglang-mt", 1.5, SUMS),
        session("pipelined", 0.6, SUMS),
        session("no-mmap", 1.8, other),
        session(
            "fastsafetensors",
            0,
            error="StrategyUnavailable: fastsafetensors is not installed (pip install fastsafetensors) at x.py:1",
        ),
    ]
    cmp = compare_strategies(sessions)
    # floor: max(1 GB cold / 2 GB/s, 2 ranks x 0.25 GB on one device / 50 GB/s) = 0.5 s
    assert floor_seconds(sessions[0]) == pytest.approx(0.5)
    assert cmp.floor_s == pytest.approx(0.5)
    assert cmp.fastest == "pipelined" and cmp.fastest_flags is not None
    assert cmp.fastest_flags.startswith("not an SGLang flag")
    assert cmp.fastest_sglang == "sglang-mt"
    rows = {r.strategy: r for r in cmp.rows}
    assert rows["pipelined"].x_floor == pytest.approx(1.2)
    assert rows["pipelined"].GBps == pytest.approx(1 / 0.6, rel=1e-3)
    assert rows["sglang"].verify == "reference" and rows["pipelined"].verify == "equal"
    assert rows["no-mmap"].verify == "differs" and rows["no-mmap"].differing == ("rank 1: draft/w",)
    assert rows["fastsafetensors"].status == "unavailable"
    assert rows["fastsafetensors"].error == "fastsafetensors is not installed (pip install fastsafetensors)"
    assert cmp.verified is False
    assert any("no-mmap loaded different" in w for w in cmp.warnings)
    assert "fastest: pipelined" in cmp.summary and "enable_multithread_load" in cmp.summary
    assert "unavailable: fastsafetensors" in cmp.summary
    assert cmp.to_dict()["fastest"] == "pipelined"


def test_comparison_flags_direct_io_that_bypassed_a_warm_cache_and_mismatched_runs() -> None:
    warm = [
        session("sglang", 1.0, cache="warm"),
        session("fastsafetensors", 2.0, storage=10**9, cache="warm"),
    ]
    warm[0].models[0].resident_bytes_before = 10**9
    warm[1].models[0].resident_bytes_before = 10**9
    warm[1].config["tp"] = 4
    cmp = compare_strategies(warm)
    fst = cmp.row("fastsafetensors")
    assert fst is not None and any("bypasses a warm page cache" in n for n in fst.notes)
    assert fst.verify == "not verified" and cmp.verified is None
    assert any("differ in tp" in w for w in cmp.warnings)
    # warm: only the H2D part of the floor is left
    assert cmp.floor_s == pytest.approx(0.01)


def test_variants_of_one_strategy_are_told_apart_by_their_parameters() -> None:
    # GIVEN `--strategy sglang:read_ahead=true,sglang,pipelined,pipelined:readers=32` (a variant listed first)
    variant = session("sglang", 1.9, SUMS)
    variant.config["strategy_params"] = {"read_ahead": True}
    wide = session("pipelined", 0.5, SUMS)
    wide.config["strategy_params"] = {"readers": 32}
    cmp = compare_strategies([variant, session("sglang", 2.0, SUMS), session("pipelined", 0.6, SUMS), wide])
    # THEN every row has its own label, the reference is sglang at its defaults, the fastest is named by label
    assert [r.label for r in cmp.rows] == [
        "sglang:read_ahead=true",
        "sglang",
        "pipelined",
        "pipelined:readers=32",
    ]
    assert [r.verify for r in cmp.rows] == ["equal", "reference", "equal", "equal"]
    assert cmp.fastest == "pipelined:readers=32" and cmp.fastest_sglang == "sglang:read_ahead=true"
    assert (
        "fastest: pipelined:readers=32" in cmp.summary and "faster than the default (2.000 s)" in cmp.summary
    )
    row = cmp.row("pipelined")
    assert row is not None and row.params == {}
    assert strategy_label(
        {"strategy": "pipelined", "strategy_params": {"readers": 8, "direct": "never"}}
    ) == ("pipelined:direct=never:readers=8")


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before + 1


def test_strategies_contain_no_timing_code() -> None:
    import ckptprof.loader.strategies as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        text = path.read_text()
        for clock in (
            "perf_counter",
            "monotonic",
            "import time",
            "enable_timing",
            "elapsed_time",
            "process_time",
        ):
            assert clock not in text, f"{path.name} reads a clock ({clock}): timing belongs to the recorder"


def test_a_filled_ring_hands_out_its_buffers() -> None:
    # GIVEN a ring whose buffers were all allocated up front (what prepare() does with pinned memory on CUDA)
    ring = pipelined_mod._Ring(count=3, size=4096, pinned=False)
    ring.fill()
    taken: list[int] = []

    def take_all() -> None:
        for _ in range(3):
            taken.append(ring.acquire()[0])

    # WHEN readers take every buffer
    t = threading.Thread(target=take_all, daemon=True)
    t.start()
    t.join(timeout=5)
    # THEN none waits: the three buffers are handed out, each once
    assert not t.is_alive(), "acquire() blocked on a filled ring"
    assert sorted(taken) == [0, 1, 2]
    ring.release(taken[0], None)
    assert ring.acquire()[0] == taken[0]


def _load_into(out: list[Any], models: list[ModelPlan], tp: int, rank: int) -> None:
    out.append(load(models, "pipelined", {"readers": 4}, tp, rank))


def test_pipelined_loads_through_a_pre_filled_ring(
    models: list[ModelPlan], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the CUDA flow on CPU: every ring buffer allocated before the load (prepare() pins them on a GPU)
    real_ring_for = pipelined_mod.Pipelined._ring_for

    def filled(self: Any, ctx: LoadContext, needed: int) -> Any:
        ring = real_ring_for(self, ctx, needed)
        if not ring._buffers:
            ring.fill()
        return ring

    monkeypatch.setattr(pipelined_mod.Pipelined, "_ring_for", filled)
    # WHEN it loads (TP1, and a TP3 rank with row-parallel staging too) THEN it finishes with sglang's values;
    # a regression would hang, so the load runs in a thread with a deadline
    for tp, rank in ((1, 0), (3, 2)):
        want = reference(models, tp, rank)
        out: list[Any] = []
        t = threading.Thread(target=_load_into, args=(out, models, tp, rank), daemon=True)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive(), "pipelined hung on a pre-filled ring"
        digests, rec = out[0]
        assert digests == want
        assert all(s.status == "ok" for m in rec.models for s in m.shards)


def test_pipelined_reader_pool_is_set_up_before_the_load_and_serves_both_models(
    models: list[ModelPlan],
) -> None:
    # GIVEN prepare() ran, as the worker runs it before the start barrier
    want = reference(models, 3, 1)
    ctx = LoadContext(rank=1, tp=3, device=torch.device("cpu"))
    for m in models:
        ctx.allocate(m)
    strategy = pipelined_mod.Pipelined(readers=3, chunk_mib=1)
    strategy.prepare(ctx, SimpleNamespace(models=models))  # type: ignore[arg-type]
    pool = list(strategy._threads)
    # THEN the readers are already running (their set-up is outside the timed load)
    assert len(pool) == 3 and all(t.is_alive() for t in pool)
    # WHEN target then draft load THEN the same threads serve both and the values are sglang's
    rec = Recorder(copy_timer=HostCopyTimer())
    rec.start()
    for m in models:
        with rec.model(m.role):
            strategy.load_model(ctx, m, rec)
    assert strategy._threads == pool and all(t.is_alive() for t in pool)
    assert param_digests(ctx) == want
    assert all(s.status == "ok" for m in rec.models for s in m.shards)
    # AND close() stops them
    strategy.close()
    assert not any(t.is_alive() for t in pool)


# -- the faithful pass -------------------------------------------------------------------------------------------


def _load_faithful(models: list[ModelPlan], tp: int, rank: int, rec: Recorder) -> dict[str, str]:
    """The worker's faithful pass: SGLang's exact sequence (no decomposition) under the given recorder."""
    ctx = LoadContext(rank=rank, tp=tp, device=torch.device("cpu"), decompose=False)
    for m in models:
        ctx.allocate(m)
    rec.start()
    for m in models:
        with rec.model(m.role):
            get_strategy("sglang").load_model(ctx, m, rec)
    return param_digests(ctx)


@pytest.mark.parametrize(("tp", "rank"), [(1, 0), (3, 1)])
def test_faithful_pass_counts_what_the_decomposed_pass_counts(
    models: list[ModelPlan], tp: int, rank: int
) -> None:
    # GIVEN the decomposed pass's per-shard counts
    refs = reference(models, tp, rank)
    _, decomposed = load(models, "sglang", {}, tp, rank)
    # WHEN the wall-only recorder runs SGLang's sequence (its loop records no phases)
    wall_only = WallOnlyRecorder(copy_timer=HostCopyTimer())
    digests = _load_faithful(models, tp, rank, wall_only)
    # THEN it loads the same values and counts the same bytes, copied bytes and tensors per shard, times no phase
    assert digests == refs
    for dec, fai in zip(decomposed.models, wall_only.models, strict=True):
        want = {s.file: (s.bytes, s.h2d_bytes, s.tensors) for s in dec.shards}
        got = {s.file: (s.bytes, s.h2d_bytes, s.tensors) for s in fai.shards}
        assert got == want
        assert all(s.read_s == s.deserialize_s == s.h2d_s == 0.0 for s in fai.shards)
        assert all(s.wall_s > 0 and s.status == "ok" for s in fai.shards)


def test_faithful_pass_marks_a_corrupt_shard_failed(small_draft: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[2]
    victim.write_bytes(struct.pack("<Q", 2**40) + victim.read_bytes()[8:])
    model = plan_model("draft", ckpt)
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer())
    _load_faithful([model], 1, 0, rec)
    by_status = {s.file: s.status for s in rec.models[0].shards}
    assert by_status.pop(victim.name) == "failed"
    assert set(by_status.values()) == {"ok"} and len(by_status) == len(model.shards) - 1


def test_shared_chunks_cover_every_row_once_and_stay_within_the_chunk(models: list[ModelPlan]) -> None:
    from ckptprof.checkpoint.header import read_header
    from ckptprof.loader.strategies.pipelined_shared import plan_chunks

    headers = [read_header(str(f)) for m in models for f in m.files]
    for chunk_bytes in (4096, 64 * 1024, 1 << 20, 64 << 20):
        chunks = plan_chunks(headers, chunk_bytes)
        assert [c.index for c in chunks] == list(range(len(chunks)))
        covered: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for c in chunks:
            # a chunk is at most chunk_bytes, unless it is a single row wider than that
            if c.end - c.start > chunk_bytes:
                assert len(c.parts) == 1 and c.parts[0].r1 - c.parts[0].r0 == 1
            for p in c.parts:
                begin = headers[c.file].data_start + p.entry.begin
                rows = p.entry.shape[0] if p.entry.shape else 1
                row_bytes = p.entry.nbytes // rows
                assert c.start + p.offset == begin + p.r0 * row_bytes
                assert c.start + p.offset + (p.r1 - p.r0) * row_bytes <= c.end
                covered.setdefault((c.file, p.entry.name), []).append((p.r0, p.r1))
        for fi, header in enumerate(headers):
            for name, entry in header.tensors.items():
                if entry.nbytes == 0:
                    continue
                spans = sorted(covered[(fi, name)])
                rows = entry.shape[0] if entry.shape else 1
                assert spans[0][0] == 0 and spans[-1][1] == rows
                assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # contiguous, no overlap


def test_vllm_prefetch_reads_its_share_of_the_files_in_the_plans_order(models: list[ModelPlan]) -> None:
    from ckptprof.loader.strategies.vllm import VllmPrefetch

    model = models[1]  # 8 shards
    shares = [
        [s.path for s in VllmPrefetch().share(LoadContext(rank=r, tp=3, device=torch.device("cpu")), model)]
        for r in range(3)
    ]
    assert shares == [[s.path for s in model.shards][r::3] for r in range(3)]
    assert sorted(p for share in shares for p in share) == sorted(s.path for s in model.shards)


def test_shared_slots_are_sized_by_the_files_not_only_by_the_chunk(models: list[ModelPlan]) -> None:
    from ckptprof.loader.strategies.pipelined_shared import PipelinedShared

    strategy = (
        PipelinedShared()
    )  # 64 MiB chunks, 16 readers: 17 slots of 64 MiB were 1.1 GB for a 16 MB checkpoint
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"))
    strategy._setup(ctx, models, f"sizing-{os.getpid()}", None)
    try:
        largest = max(s.bytes for m in models for s in m.shards)
        assert strategy._slot_bytes <= largest + 3 * 4096
        assert 2 <= strategy._slots <= 17
        region = strategy._region
        assert region is not None and region.size <= strategy._slots * strategy._slot_bytes + 4096
    finally:
        strategy.close()


def test_the_hosts_warm_pipeline_raises_the_floor_where_it_binds() -> None:
    """GIVEN a warm run WHEN the probe measured what the host reaches reading the page cache and copying at once
    THEN every copied byte through that rate bounds the floor (it binds below min(page cache, H2D))."""
    warm = session("pipelined", 0.05, cache="warm")
    warm.models[0].resident_bytes_before = 10**9
    only_h2d = floor_seconds(warm)
    assert only_h2d == pytest.approx(0.01)  # 2 ranks x 0.25 GB on one device / 50 GB/s
    warm.ceilings = dataclasses.replace(warm.ceilings, warm_pipeline_GBps=25.0)
    assert floor_seconds(warm) == pytest.approx(0.5e9 / 25e9)
    warm.ceilings = dataclasses.replace(warm.ceilings, warm_pipeline_GBps=500.0)  # faster than the link
    assert floor_seconds(warm) == pytest.approx(only_h2d)
