"""Batch 48 (reports/cpu/2026-12-06g-bootlog-unseen): a crash tail whose only word on the failed step is SGLang's own
error (`Exception: Capture cuda graph failed: ...`, raised by its graph runners), and a Ray worker's load line relayed
late (stamped before the excerpt's first line, printed after the KV cache line)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

OOM_TAIL = [
    "Exception: Capture cuda graph failed: CUDA out of memory.",
    "Tried to allocate 672.00 MiB.",
    "",
    "[2026-04-26 14:38:11] Rank 0 scheduler is dead. Please check if there are relevant logs.",
    "[2026-04-26 14:38:11] Exit code: -3",
]


def _log(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


def test_an_error_that_names_the_failed_capture_says_the_step() -> None:
    """GIVEN SGLang's graph runner's own error alone, with no phase record and no frame WHEN read THEN the failure is
    in cuda-graph: the error's words say so (the draft's runners raise the same words; nothing here names a draft)."""
    report = analyze_bytes(_log(OOM_TAIL))
    assert report.failure is not None
    assert report.failure.phase == "cuda-graph"
    assert report.failure.model == "target"
    assert report.failure.error.startswith("Exception: Capture cuda graph failed")


def test_the_frozen_kv_mtp_runners_error_names_the_draft() -> None:
    report = analyze_bytes(
        _log(["Exception: Capture frozen-KV MTP cuda graph failed: CUDA out of memory.", *OOM_TAIL[3:]])
    )
    assert report.failure is not None
    assert (report.failure.phase, report.failure.model) == ("cuda-graph", "draft")


def test_a_frame_that_names_the_step_is_kept_over_the_errors_words() -> None:
    """GIVEN a whole traceback whose frames say the weights were loading, and whose error quotes a capture's words
    WHEN read THEN the frames win: they say where the process was."""
    lines = [
        "[2026-04-26 14:38:10 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/sglang/srt/model_executor/model_runner.py", line 1, in load_model',
        "    self.load()",
        "Exception: Capture cuda graph failed: an earlier run's words",
    ]
    report = analyze_bytes(_log(lines))
    assert report.failure is not None
    assert report.failure.phase == "load-weights"


def test_a_vllm_error_with_sglangs_words_is_read_by_vllms_table() -> None:
    """GIVEN a vLLM boot whose error line holds the words (quoted from elsewhere) WHEN read THEN no step is named from
    them: the words are SGLang's, read only where the log is SGLang's or no engine's."""
    lines = [
        "INFO 05-17 09:38:43 llm_engine.py:74] Initializing an LLM engine (v0.4.0) with config: model='m'",
        "ERROR 05-17 09:38:44 engine.py:1] Exception: Capture cuda graph failed: quoted",
    ]
    report = analyze_bytes(_log(lines))
    assert report.failure is not None
    assert report.failure.phase != "cuda-graph"


NEXT_SERVER = [
    "(APIServer pid=2) INFO 07-01 14:07:43 [api_utils.py:273] non-default args: {'model_tag': 'm'}",
    "(EngineCore pid=3) INFO 07-01 14:07:55 [default_loader.py:430] Loading weights took 1.52 seconds",
]


def test_a_crash_tail_then_a_new_server_reads_as_two_boots() -> None:
    """GIVEN a tail that ends in a dead scheduler (no phase, no traceback) after an error that names the step it
    failed in, then another server's start WHEN read THEN two boots: the first server had got as far as its graphs,
    and the configuration starts the next one (a bare death word would not be enough: test_bootlog_phases)."""
    report = analyze_bytes(_log([*OOM_TAIL, *NEXT_SERVER]))
    assert report.boots == 2
    assert report.failure is None
    first = analyze_bytes(_log([*OOM_TAIL, *NEXT_SERVER]), boot=1)
    assert first.failure is not None and first.failure.phase == "cuda-graph"


def test_a_retried_error_before_the_servers_start_is_no_boot_of_its_own() -> None:
    """GIVEN an error a process said it would retry, then the server's configuration WHEN read THEN one boot: an error
    is no death (only a death or a traceback ends a server that logged no phase)."""
    lines = [
        "[2026-03-27 20:55:34] retry() failed once (0th try, maximum 2 retries). Will delay 0.92s and retry. "
        "Error: The read operation timed out",
        "TimeoutError: The read operation timed out",
        *NEXT_SERVER,
    ]
    assert analyze_bytes(_log(lines)).boots == 1


RELAYED = [
    "INFO 05-17 09:38:43 ray_gpu_executor.py:228] # GPU blocks: 8073, # CPU blocks: 682",
    "INFO 05-17 09:38:44 model_runner.py:970] Capturing the model for CUDA graphs. This may lead to unexpected "
    "consequences if the model is not static.",
    "(RayWorkerVllm pid=43401) INFO 05-17 09:38:30 model_runner.py:169] Loading model weights took 9.7006 GB "
    "[repeated 6x across cluster]",
    "INFO 05-17 09:38:44 model_runner.py:1061] Graph capturing finished in 0 secs.",
]


def test_a_load_relayed_late_never_ends_before_it_starts() -> None:
    """GIVEN a worker's load line that Ray flushed late (stamped 13 s before the KV cache line it follows) WHEN read
    THEN the load is not measured from the last phase's end (-13 s): its start is not in the log, and it ran first."""
    report = analyze_bytes(_log(RELAYED))
    phases = {phase.name: phase for phase in report.phases}
    load = phases["load-weights"]
    assert load.seconds is not None and load.seconds >= 0
    assert load.end is not None and load.end.endswith("09:38:30")
    assert [phase.name for phase in report.phases] == ["load-weights", "kv-cache", "cuda-graph"]


def test_a_load_in_order_keeps_its_place() -> None:
    """GIVEN the same lines with the load line where its time puts it WHEN read THEN the same order: only a line
    relayed late is moved."""
    report = analyze_bytes(_log([RELAYED[2], RELAYED[0], RELAYED[1], RELAYED[3]]))
    assert [phase.name for phase in report.phases] == ["load-weights", "kv-cache", "cuda-graph"]


@pytest.mark.parametrize("folded", [True, False])
def test_ranks_ray_may_have_folded_into_one_line_are_not_called_missing(folded: bool) -> None:
    """GIVEN two workers, and one load line standing for seven copies WHEN read THEN no rank is said not to have logged
    the load; without the fold the other worker is named."""
    suffix = " [repeated 6x across cluster]" if folded else ""
    lines = [
        f"(RayWorkerVllm pid=1) INFO 05-17 09:38:30 model_runner.py:169] Loading model weights took 9.7 GB{suffix}",
        "(RayWorkerVllm pid=2) INFO 05-17 09:38:31 gpu_executor.py:1] # GPU blocks: 1, # CPU blocks: 1",
        "(RayWorkerVllm pid=1) INFO 05-17 09:38:31 gpu_executor.py:1] # GPU blocks: 1, # CPU blocks: 1",
        "INFO 05-17 09:38:44 model_runner.py:970] Capturing the model for CUDA graphs.",
    ]
    warnings = [w for w in analyze_bytes(_log(lines)).warnings if w.startswith("load-weights")]
    assert (warnings == []) is folded
