"""``pipelined-shared``: each byte read once per node, handed to the TP ranks through shared host memory.

Ranks run as real processes on CPU (the shared memory, the gloo barriers and the chunk hand-over are the same
code a GPU run uses; only the pinning and the side stream are CUDA's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptprof.checkpoint import fs
from ckptprof.loader import ranks
from ckptprof.loader.plan import ModelPlan, build_plan

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]


@pytest.mark.parametrize(
    ("tp", "params", "cache"),
    [
        (3, {"chunk_mib": 0.25, "readers": 2}, "warm"),  # small chunks: tensors split between rows and ranks
        (3, {"chunk_mib": 0.5, "slots": 2}, "warm"),  # the fewest slots: one round read ahead
        (2, {}, "cold"),  # default chunks: fewer chunks than rounds of every rank
        (4, {"chunk_mib": 1, "direct": "always"}, "cold"),  # O_DIRECT reads, aligned into the slots
    ],
    ids=["tp3-small-chunks-warm", "tp3-two-slots-warm", "tp2-default-cold", "tp4-direct-cold"],
)
def test_every_rank_ends_with_sglangs_values_and_the_node_reads_each_byte_once(
    small_verifier: Path,
    small_draft: Path,
    sglang_digests: Digests,
    tp: int,
    params: dict[str, Any],
    cache: str,
) -> None:
    plan = build_plan(
        small_verifier,
        small_draft,
        tp=tp,
        devices="cpu",
        strategy="pipelined-shared",
        strategy_params=params,
        verify=True,
    )
    files = [f for m in plan.models for f in m.files]
    if cache == "cold":
        fs.drop_cache(files)
    else:
        fs.warm_cache(files)
    results = ranks.run_spawned(plan)
    assert [r.rank for r in results] == list(range(tp))
    read = 0
    for r in results:
        assert r.status == "ok" and r.error is None, r.error
        assert r.checksums == sglang_digests(plan.models, tp, r.rank), f"rank {r.rank}"
        for model, rm in zip(plan.models, r.models, strict=True):
            assert rm.role == model.role
            assert sorted(s.file for s in rm.shards) == sorted(s.name for s in model.shards)
            assert all(s.status == "ok" for s in rm.shards), [s.error for s in rm.shards]
            assert sum(s.h2d_bytes for s in rm.shards) > 0
        read += sum(s.bytes for m in r.models for s in m.shards)
    # The ranks' reads together cover the tensor bytes once (headers and O_DIRECT's alignment aside): no rank
    # reads what another read.
    tensor_bytes = sum(s.bytes for m in plan.models for s in m.shards)
    assert 0.9 * tensor_bytes <= read <= tensor_bytes


def test_a_corrupt_shard_fails_on_every_rank_and_the_rest_loads(
    small_draft: Path, tmp_path: Path, sglang_digests: Digests
) -> None:
    import shutil
    import struct

    ckpt = tmp_path / "c"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[2]
    victim.write_bytes(struct.pack("<Q", 2**40) + victim.read_bytes()[8:])
    plan = build_plan(
        ckpt, tp=2, devices="cpu", strategy="pipelined-shared", strategy_params={"chunk_mib": 0.5}
    )
    results = ranks.run_spawned(plan)
    for r in results:
        shards = {s.file: s.status for m in r.models for s in m.shards}
        assert shards.pop(victim.name) == "failed"
        assert set(shards.values()) == {"ok"}, r.error


def test_a_rank_that_dies_stops_the_ranks_sharing_its_reads_within_seconds(
    small_draft: Path, tmp_path: Path
) -> None:
    """GIVEN a TP2 pipelined-shared run WHEN one rank is killed mid-load THEN the other, which waits for that rank's
    chunks, fails at once saying why (not after the process group's 2-minute timeout), and the run ends."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from ckptprof.session import Session

    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "CKPTPROF_FAULT_DELAY_S": "0.4",
        "CKPTPROF_FAULT_MARK_DIR": str(out),
        "OMP_NUM_THREADS": "1",
    }
    argv = ["run", str(small_draft), "--tp", "2", "--devices", "cpu", "--no-probe", "-q", "-o", str(out)]
    argv += ["--strategy", "pipelined-shared:chunk_mib=1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptprof", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60  # a hang guard for the wait, not a claim about speed
    while not (out / "rank1").exists():  # rank 1 has finished a shard: it is past the start, mid-load
        assert time.monotonic() < deadline, "rank 1 never finished a shard"
        time.sleep(0.05)
    ranks = [
        k for k in psutil.Process(proc.pid).children(recursive=True) if k.name().startswith("ckptprof:TP")
    ]
    victim = ranks[-1]  # whichever rank it is: the session says which, below
    victim.send_signal(signal.SIGKILL)
    # A hang guard, not a speed claim: a rank left waiting for its dead peer's chunks fails here (TimeoutExpired).
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 2, err
    session = Session.load(out / "session.json")
    (killed,) = [r for r in session.ranks if "SIGKILL" in (r.error or "")]
    (other,) = [r for r in session.ranks if r is not killed]
    assert killed.status == other.status == "failed"
    assert f"rank {killed.rank} (pid {victim.pid}) died during the load" in (other.error or ""), other.error
    # (told of the death, not stopped by the rank timeout's silence)
    assert "no progress" not in (other.error or ""), other.error
