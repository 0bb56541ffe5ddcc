"""Batch 53 (reports/cpu/2026-12-06n-bootlog-unseen): a process killed by the CUDACHECK macro of vLLM's custom
all-reduce kernels (`Failed: Cuda error <file>:<line> '<reason>'`, then exit; sglang#1509), and a Ray worker's load seen
only by its download (`Time spent downloading weights`, vllm#28658)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

SGLANG_03_INIT = b"""[19:01:01 TP0] Init nccl begin.
[19:01:01 TP1] Init nccl begin.
NCCL version 2.20.5+cuda12.4
"""


@pytest.mark.parametrize("spelling", [b"Cuda", b"CUDA"])
def test_a_cudacheck_failure_ends_the_boot(spelling: bytes) -> None:
    """GIVEN two ranks in their distributed init WHEN the CUDACHECK macro prints its failure (and exits the process)
    THEN the boot failed there, with the macro's reason as its error."""
    line = (
        b"Failed: "
        + spelling
        + b" error /workspace/csrc/custom_all_reduce.cuh:307 'peer access is not supported'\n"
    )
    report = analyze_bytes(SGLANG_03_INIT + line)
    assert report.state == "failed"
    assert report.failure is not None and report.failure.phase == "init-distributed"
    assert report.error is not None and "peer access is not supported" in report.error


def test_a_line_that_only_mentions_a_cuda_error_is_no_death() -> None:
    """GIVEN a record that quotes the words elsewhere than at its start WHEN read THEN the boot goes on."""
    line = b"[19:01:02 TP0] Retrying after 'Failed: Cuda error' was reported by a test kernel.\n"
    assert analyze_bytes(SGLANG_03_INIT + line).state != "failed"


RAY_WORKER = b"(EngineCore_DP0 pid=1769) (RayWorkerWrapper pid=405) "


def test_a_download_says_the_load_is_under_way_where_its_begin_was_cut() -> None:
    """GIVEN a Ray worker's lines that open after its `Starting to load model` WHEN it says how long the download took
    THEN its load is under way from there."""
    log = (
        RAY_WORKER
        + b"INFO 11-13 06:18:13 [cuda.py:417] Using FLASH_ATTN backend.\n"
        + RAY_WORKER
        + b"INFO 11-13 06:21:04 [weight_utils.py:441] Time spent downloading weights for m: 170.155065 seconds\n"
    )
    report = analyze_bytes(log)
    assert report.state == "load-weights"
    assert [(phase.name, phase.model, phase.start) for phase in report.phases] == [
        ("load-weights", "target", "11-13 06:21:04")
    ]


def test_a_download_after_the_loads_begin_opens_no_second_load() -> None:
    """GIVEN a load begun by `Starting to load model` WHEN its download is reported, then its end THEN one load, from
    its begin, and no draft's."""
    log = b"""INFO 03-01 07:56:43 [gpu_model_runner.py:1299] Starting to load model meta-llama/Llama-3.2-1B...
INFO 03-01 07:56:47 [weight_utils.py:273] Time spent downloading weights for meta-llama/Llama-3.2-1B: 3.58 seconds
INFO 03-01 07:56:52 [default_loader.py:423] Loading weights took 5.38 seconds
INFO 03-01 07:56:53 [gpu_model_runner.py:1310] Model loading took 2.3 GiB and 9.1 seconds
"""
    report = analyze_bytes(log)
    assert [(phase.name, phase.model, phase.start) for phase in report.phases] == [
        ("load-weights", "target", "03-01 07:56:43")
    ]
