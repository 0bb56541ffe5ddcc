"""Batch 28 (reports/cpu/2026-12-05r-bootlog-unseen): Ray runs each data-parallel engine core as an actor and tags its
lines with the class name alone, "(DPEngineCoreActor pid=5439, ip=10.233.69.249)", behind the API server's tag. One
actor per DP rank: two actors are two ranks, told apart by their process ids."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record

ACTOR = "(APIServer pid=5332) (DPEngineCoreActor pid={pid}{ip}) INFO 01-12 06:15:{s:02d} [{file}] {message}\n"


def _line(pid: int, second: int, file: str, message: str, ip: str = "") -> bytes:
    return ACTOR.format(pid=pid, ip=ip, s=second, file=file, message=message).encode()


def test_each_data_parallel_actor_is_a_rank_of_its_own() -> None:
    log = b"".join(
        (
            _line(
                5439,
                21,
                "gpu_model_runner.py:2602",
                "Starting to load model Qwen/Qwen2.5-0.5B-Instruct...",
                ", ip=1.2.3.4",
            ),
            _line(
                5862, 22, "gpu_model_runner.py:2602", "Starting to load model Qwen/Qwen2.5-0.5B-Instruct..."
            ),
            _line(5439, 28, "default_loader.py:267", "Loading weights took 0.91 seconds", ", ip=1.2.3.4"),
            _line(5862, 29, "default_loader.py:267", "Loading weights took 0.93 seconds"),
        )
    )
    load = next(phase for phase in analyze_bytes(log).phases if phase.name == "load-weights")
    assert load.ranks == 2


def test_an_actor_tag_names_its_process() -> None:
    record = parse_record(
        "(APIServer pid=5332) (DPEngineCoreActor pid=5439, ip=10.233.69.249) INFO 01-12 06:15:20 [x.py:1] hello"
    )
    # the process id carries the node its tag names (batch 66: ids are a node's own)
    assert (record.rank, record.pid, record.message) == ("pid5439", "5439@10.233.69.249", "hello")
