"""Batch 58 (reports/cpu/2026-12-06s-bootlog-unseen): an SGLang log cut in its warm-up request is not ready yet
(sglang#16920, #3781); a ModelConfig warning of SGLang's is evidence of it (sglang#23386); a late rank's end of a
step the others had left is no step begun later (sglang#5390)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

GRAPHS = b"""[2026-01-12 02:46:59 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=6.0 GB
[2026-01-12 02:47:08 TP0] Capture cuda graph end. Time elapsed: 7.86 s. mem usage=0.27 GB. avail mem=5.74 GB.
[2026-01-12 02:47:09] INFO:     Started server process [49]
[2026-01-12 02:47:09] INFO:     Waiting for application startup.
[2026-01-12 02:47:09] INFO:     Application startup complete.
[2026-01-12 02:47:09] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
"""
WARM_UP_LINES = {
    "deprecated-endpoint": b"[2026-01-12 02:47:10] Endpoint '/get_model_info' is deprecated and will be removed\n",
    "prefill": b"[2026-01-12 02:47:10 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00\n",
}
READY = b"[2026-01-12 02:47:12] The server is fired up and ready to roll!\n"


@pytest.mark.parametrize("line", WARM_UP_LINES.values(), ids=WARM_UP_LINES.keys())
def test_a_log_cut_in_the_warm_up_request_is_not_ready_yet(line: bytes) -> None:
    """GIVEN the HTTP server up, then the warm-up's model-info request or prefill, and no ready line WHEN read THEN the
    boot stands in its last step and the summary says the warm-up is under way."""
    report = analyze_bytes(GRAPHS + line)
    assert report.state == "cuda-graph"
    assert "warm-up request is under way" in report.summary
    assert "ready" not in [phase.name for phase in report.phases]


def test_the_http_server_up_with_nothing_after_it_is_still_up() -> None:
    """GIVEN a log that ends at uvicorn's lines WHEN read THEN it is up, as before (nothing says the warm-up began)."""
    report = analyze_bytes(GRAPHS)
    assert report.state == "ready"


def test_the_warm_up_then_the_ready_line_is_ready() -> None:
    """GIVEN the warm-up's prefill, then the ready line, then a served request's prefill WHEN read THEN it is ready, with
    its ready step: the warm-up's lines do not undo a ready line."""
    report = analyze_bytes(GRAPHS + WARM_UP_LINES["prefill"] + READY + WARM_UP_LINES["prefill"])
    assert report.state == "ready"
    assert [phase.name for phase in report.phases][-1] == "ready"
    assert "warm-up" not in report.summary


def test_an_offline_engines_prefill_says_nothing_of_a_warm_up() -> None:
    """GIVEN an engine with no HTTP server (SGLang's offline Engine) that prefills WHEN read THEN no warm-up is said."""
    report = analyze_bytes(GRAPHS.split(b"[2026-01-12 02:47:09]")[0] + WARM_UP_LINES["prefill"])
    assert "warm-up" not in report.summary


def test_sglangs_deepgemm_scale_warning_says_which_engine_wrote_the_log() -> None:
    """GIVEN torch's capability warning and SGLang's DeepGEMM scale warning alone (sglang#23386) WHEN read THEN the
    log is SGLang's."""
    log = (
        b"/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:283: UserWarning:\n"
        b"    Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n"
        b"[2026-04-21 16:09:13] DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause ac"
    )
    assert analyze_bytes(log).framework == "sglang"


def test_a_late_ranks_end_of_an_earlier_step_is_no_newer_step() -> None:
    """GIVEN two ranks that ended init and began loading, then a third rank's init end WHEN read THEN the boot stands in
    the load, not in init (sglang#5390)."""
    log = b"""[2025-05-13 23:28:26 DP0 TP0] Init torch distributed ends. mem usage=2.38 GB
[2025-05-13 23:28:26 DP0 TP0] Load weight begin. avail mem=175.37 GB
[2025-05-13 23:28:26 DP2 TP2] Init torch distributed ends. mem usage=2.50 GB
[2025-05-13 23:28:26 DP2 TP2] Load weight begin. avail mem=175.25 GB
[2025-05-13 23:28:27 DP1 TP1] Init torch distributed ends. mem usage=2.5
"""
    report = analyze_bytes(log)
    assert report.state == "load-weights"
    assert "nothing newer logged yet" not in report.summary


def test_a_ranks_second_run_of_a_step_is_its_newest() -> None:
    """GIVEN a rank that captured graphs (vLLM 0.21+'s memory profile), sized its KV cache, then captured them again
    WHEN read THEN it stands in the graphs again: the rank's second run of the step is a step begun later."""
    core = b"(EngineCore pid=5) INFO 09-23 "
    bar = b"Capturing CUDA graphs (PIECEWISE): 100%|##########| 11/11 [00:00<00:00, 17.20it/s]\n"
    log = b"".join(
        [
            core + b"11:00:26 [core.py:1] Initializing a V1 LLM engine (v0.30.0) with config: model='/m', "
            b"speculative_config=None, tensor_parallel_size=1\n",
            core + b"11:00:29 [default_loader.py:1] Loading weights took 1.29 seconds\n",
            core + b"11:00:30 [model_runner.py:1] Model loading took 7.56 GiB memory and 2.8 seconds\n",
            bar,
            core + b"11:00:55 [model_runner.py:1] Graph capturing finished in 1 secs, took 0.11 GiB\n",
            core + b"11:00:55 [gpu_worker.py:1] Available KV cache memory: 1.67 GiB\n",
            core + b"11:00:55 [kv_cache_utils.py:1] GPU KV cache size: 12,176 tokens\n",
            bar,
            core + b"11:00:59 [model_runner.py:1] Graph capturing finished in 2 secs, took 0.09 GiB\n",
        ]
    )
    report = analyze_bytes(log)
    assert report.state == "cuda-graph"
    assert [phase.model for phase in report.phases if phase.name == "cuda-graph"] == ["target"]
