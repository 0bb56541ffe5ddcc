"""The replay and the probes on real CUDA devices. Skipped where torch sees no GPU (CI and laptops).

Run on a GPU machine with `python -m pytest -q tests/gpu`. Every check compares values the replay produced with
values computed independently here: parameter digests against the default strategy loaded on CPU, copy times against
the host's wall clock, pinned against pageable ceilings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ckptprof import api
from ckptprof.analysis.attribution import model_totals
from ckptprof.loader.copytimers import CudaCopyTimer
from ckptprof.loader.plan import ModelPlan, build_plan
from ckptprof.probe import transfer

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cuda_events_time_a_host_to_device_copy_within_the_host_wall() -> None:
    # GIVEN 256 MB in pageable host memory and a buffer on the GPU
    src = torch.ones(256 * 2**20, dtype=torch.uint8)
    dst = torch.empty_like(src, device="cuda:0")
    dst.copy_(src)  # the first copy pays for the context and the staging buffers
    torch.cuda.synchronize()
    timer = CudaCopyTimer(torch.device("cuda:0"))
    # WHEN the timer brackets one copy
    t0 = time.perf_counter()
    token = timer.start()
    dst.copy_(src)
    span = timer.stop(token)
    seconds = timer.seconds([span])
    wall = time.perf_counter() - t0
    # THEN the copy took real time, no more than the host waited for it, and the bytes arrived
    assert 0 < seconds <= wall + 1e-3
    assert 256 * 2**20 / seconds / 1e9 < 200  # no PCIe link moves 200 GB/s: the events did bracket the copy
    assert int(dst.sum().item()) == 256 * 2**20


def test_pinned_copies_beat_pageable_ones_on_every_probed_device() -> None:
    devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    ceilings = transfer.measure_transfer(devices, nbytes=256 * 2**20)
    for d in devices:
        pinned, pageable = ceilings["h2d_pinned_GBps"][d], ceilings["h2d_pageable_GBps"][d]
        assert pinned > pageable > 0, (d, pinned, pageable)


def test_more_ranks_than_gpus_load_sglangs_values_onto_the_gpus(
    small_draft: Path, sglang_digests: Digests
) -> None:
    # GIVEN twice as many TP ranks as there are GPUs (round-robin: two rank processes per device)
    gpus = torch.cuda.device_count()
    tp = 2 * gpus
    # WHEN the replay runs cold on every GPU, with the faithful check and value digests
    session = api.replay(
        small_draft, tp=tp, devices="cuda", cache="cold", faithful=True, probe=False, verify=True
    )
    # THEN every rank finished on its round-robin device with real CUDA copies (not the host stand-in)
    assert [r.device for r in session.ranks] == [f"cuda:{i % gpus}" for i in range(tp)]
    assert all(r.status == "ok" for r in session.ranks), [r.error for r in session.ranks]
    assert session.verdict.h2d_stand_in is False
    for r in session.ranks:
        (model,) = r.models
        totals = model_totals(model)
        assert totals.h2d_s > 0 and totals.h2d_bytes > 0
        assert model.faithful_wall_s is not None and model.faithful_wall_s > 0
        # AND each rank holds exactly what SGLang's default path gives that rank, computed on CPU here
        assert r.checksums == sglang_digests(build_plan(small_draft, tp=tp).models, tp, r.rank), (
            f"rank {r.rank}"
        )
    assert session.verdict.faithful_delta is not None


@pytest.mark.parametrize("strategy", ["sglang-mt", "no-mmap", "prefetch", "pipelined", "pipelined-shared"])
def test_every_strategy_loads_sglangs_values_onto_a_shared_gpu(
    small_draft: Path, strategy: str, sglang_digests: Digests
) -> None:
    # GIVEN 2 ranks sharing cuda:0, each loading through one of SGLang's other paths
    session = api.replay(
        small_draft, tp=2, devices="cuda:0", cache="warm", strategy=strategy, probe=False, verify=True
    )
    # THEN both finished with real CUDA copies and hold what the default path gives them (computed on CPU here)
    assert all(r.status == "ok" for r in session.ranks), [r.error for r in session.ranks]
    assert session.verdict.h2d_stand_in is False
    for r in session.ranks:
        assert r.checksums == sglang_digests(build_plan(small_draft, tp=2).models, 2, r.rank), (
            f"{strategy} {r.rank}"
        )


PEERS = {"runai-streamer": "runai_model_streamer", "instanttensor": "instanttensor"}


@pytest.mark.parametrize("strategy", list(PEERS))
@pytest.mark.parametrize("spread", ["shared", "own"])
def test_the_peers_real_loaders_load_sglangs_values(
    small_draft: Path, strategy: str, spread: str, sglang_digests: Digests
) -> None:
    # GIVEN a peer's real package (skipped where it is not installed: tests/unit cover the unavailable path)
    pytest.importorskip(PEERS[strategy])
    gpus = torch.cuda.device_count()
    if spread == "own" and gpus < 2:
        pytest.skip("one GPU per rank needs two GPUs")
    # WHEN 2 ranks load through it, sharing cuda:0 or one GPU each (instanttensor's NCCL group)
    devices = "cuda:0" if spread == "shared" else "cuda:0,cuda:1"
    session = api.replay(
        small_draft, tp=2, devices=devices, cache="cold", strategy=strategy, probe=False, verify=True
    )
    # THEN both ranks hold what SGLang's default path gives them, and every shard was read and copied
    assert all(r.status == "ok" and not r.error for r in session.ranks), [r.error for r in session.ranks]
    for r in session.ranks:
        assert r.checksums == sglang_digests(build_plan(small_draft, tp=2).models, 2, r.rank), r.rank
        shards = r.models[0].shards
        assert all(s.status == "ok" and s.bytes > 0 for s in shards)
        assert sum(s.h2d_bytes for s in shards) > 0


def test_the_fastsafetensors_ceiling_is_fitted_with_the_real_package(small_draft: Path) -> None:
    # GIVEN the real package on a GPU (skipped where it is not installed: tests/unit cover the fit itself)
    pytest.importorskip("fastsafetensors")
    from ckptprof.probe import loader_rate
    from ckptprof.probe.run_probes import collect_paths
    from ckptprof.rates import predicted_seconds

    # WHEN the probe times it on the checkpoint's files, one loader per file as SGLang does
    paths = collect_paths([str(small_draft)])
    rates, notes = loader_rate.measure_fastsafetensors(paths, ["cuda:0"])
    # THEN it measured a rate and a setup from several files, and the prediction prices the whole checkpoint
    assert not notes, notes
    assert rates["fastsafetensors_GBps"] > 0 and rates["fastsafetensors_sample_files"] >= 2
    assert all(b > 0 and s > 0 for b, s in rates["fastsafetensors_sample"])
    batches = [[p.stat().st_size] for p in paths]
    assert (predicted_seconds(rates["fastsafetensors_sample"], batches) or 0.0) > 0
