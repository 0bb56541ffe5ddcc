"""Batch 49 (reports/cpu/2026-12-06h-bootlog-unseen): a vLLM 0.27 boot whose kernel warm-up dies on an import after the KV
cache was sized. compile_or_warm_up_model warms the kernels up before it captures the graphs: the innermost frame says
which of the two failed."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

CORE = "(EngineCore pid=1632893) "
HEAD = [
    "(EngineCore pid=1632893) INFO 08-14 10:00:01 [gpu_worker.py:1] Available KV cache memory: 10.0 GiB",
    f"{CORE}ERROR 08-14 10:00:05 [core.py:1] EngineCore failed to start.",
    f"{CORE}ERROR 08-14 10:00:05 [core.py:1] Traceback (most recent call last):",
    f'{CORE}ERROR 08-14 10:00:05 [core.py:1]   File "/x/vllm/v1/worker/gpu_worker.py", line 713, in compile_or_warm_up_model',
]
WARMUP = [
    f"{CORE}ERROR 08-14 10:00:05 [core.py:1]     kernel_warmup(self)",
    f'{CORE}ERROR 08-14 10:00:05 [core.py:1]   File "/x/vllm/model_executor/warmup/kernel_warmup.py", line 100, in kernel_warmup',
]
ERROR = [f"{CORE}ERROR 08-14 10:00:05 [core.py:1] TypeError: type 'array.array' is not subscriptable"]


@pytest.mark.parametrize(
    ("frames", "step"),
    [(WARMUP, "kernel warm-up"), ([], "compilation and CUDA graph capture")],
    ids=["warm-up", "capture"],
)
def test_a_crash_in_the_warm_up_names_the_warm_up(frames: list[str], step: str) -> None:
    report = analyze_bytes("".join(f"{line}\n" for line in [*HEAD, *frames, *ERROR]).encode())
    assert report.failure is not None
    assert (report.failure.phase, report.failure.step) == ("cuda-graph", step)


ADJUST = "INFO 04-27 03:09:55 [parallel_state.py:838] Adjusting world_size=2 rank={n} distributed_init_method=tcp://h:1 for DP"
ASSIGNED = "INFO 04-27 03:10:45 [parallel_state.py:959] rank {n} in world size 2 is assigned as DP rank {n}, PP rank 0, TP rank 0"


@pytest.mark.parametrize(("named", "ranks"), [((0, 1), 2), ((0,), 1)], ids=["two-processes", "one-process"])
def test_untagged_processes_that_each_name_their_rank_are_ranks_of_their_own(
    named: tuple[int, ...], ranks: int
) -> None:
    """GIVEN an offline engine per rank under torchrun (vllm-ascend#672): no process tag, each process naming its own
    global rank in `Adjusting world_size=2 rank=N` WHEN read THEN init-distributed counts each process that named
    itself; one rank named alone may be the untagged process itself, and stays one."""
    lines = [ADJUST.format(n=n) for n in named] + [ASSIGNED.format(n=n) for n in named]
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    init = next(phase for phase in report.phases if phase.name == "init-distributed")
    assert init.ranks == ranks
