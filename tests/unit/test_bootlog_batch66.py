"""Batch 66 (reports/cpu/2026-12-07h-bootlog-unseen): vLLM 0.4.0 at TP4 over Ray on three nodes. Two of the workers on
different nodes had the same process id (`(RayWorkerVllm pid=433, ip=10.128.8.137)` and `(RayWorkerVllm pid=433,
ip=10.129.10.184)`): process ids are a node's own, and containers on two nodes often hand out the same ones. Read by
the id alone, the two were one rank, and the load counted three ranks of four."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record, pid_label

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
RAY = REAL / "vllm-odog96-cdsw-mistral-7b-v040-ray-multinode-tp4-offline-ready.log"


def _load(worker: str, stamp: str) -> bytes:
    return (
        f"{worker} INFO 04-04 {stamp} weight_utils.py:177] Using model weights format ['*.safetensors']\n"
        f"{worker} INFO 04-04 {stamp} model_runner.py:104] Loading model weights took 3.3804 GB\n"
    ).encode()


def test_one_process_id_on_two_nodes_is_two_ranks() -> None:
    """GIVEN two workers with one process id on two nodes, and a third WHEN read THEN the load counts three ranks, and
    the second node's worker is named with its node."""
    log = (
        _load("(RayWorkerVllm pid=433, ip=10.128.8.137)", "03:04:16")
        + _load("(RayWorkerVllm pid=433, ip=10.129.10.184)", "03:04:17")
        + _load("(RayWorkerVllm pid=435, ip=10.129.8.254)", "03:03:57")
    )
    (load,) = [phase for phase in analyze_bytes(log).phases if phase.name == "load-weights"]
    assert load.ranks == 3
    assert load.slowest_rank == "pid433@10.129.10.184"


def test_one_node_per_process_id_keeps_the_plain_label() -> None:
    """GIVEN workers whose ids differ WHEN one fails THEN its rank is `pid433`, as FORMAT.md and the corpus's answers
    name it, whatever node it ran on."""
    tag = "(RayWorkerWrapper pid=433, ip=10.128.8.137)"
    log = (
        _load("(RayWorkerWrapper pid=435, ip=10.129.8.254)", "03:03:57")
        + f"{tag} ERROR 04-04 03:04:18 worker_base.py:145] Traceback (most recent call last):\n".encode()
        + f"{tag} ERROR 04-04 03:04:18 worker_base.py:145] KeyError: 'model.layers.0.w'\n".encode()
    )
    failure = analyze_bytes(log).failure
    assert failure is not None and failure.rank == "pid433"


def test_the_node_travels_with_the_id_and_the_label_drops_it() -> None:
    record = parse_record("(RayWorkerVllm pid=433, ip=10.129.10.184) INFO 04-04 03:03:46 x.py:1] hello")
    assert (record.pid, record.rank) == ("433@10.129.10.184", "pid433")
    assert pid_label("433") == pid_label("433@10.1.2.3") == "pid433"


def test_the_real_ray_run_loads_on_four_ranks() -> None:
    (load,) = [phase for phase in analyze_bytes(RAY.read_bytes()).phases if phase.name == "load-weights"]
    assert load.ranks == 4
