"""What blind batch 6 of issue #33 taught the reader (reports/cpu/2026-12-03e-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.failures import EXCEPTION_LINE_RE
from ckptprof.bootlog.wrappers import unlink


@pytest.mark.parametrize(
    ("line", "is_error"),
    [
        ("Exception: Capture cuda graph failed: [pair.cc:534] Connection closed", True),
        ("Exception", True),
        ("ValueError: No available memory for the cache blocks.", True),
        ("torch.OutOfMemoryError: CUDA out of memory.", True),
        # a word that merely starts with it, or a sentence about one, is not an exception's line
        ("Exceptional: nothing failed", False),
        ("Exception handling is on", False),
    ],
)
def test_a_bare_exception_is_an_error_line(line: str, is_error: bool) -> None:
    assert (EXCEPTION_LINE_RE.match(line) is not None) is is_error


def test_a_bare_exception_closes_sglangs_capture_traceback() -> None:
    # GIVEN SGLang's `raise Exception(...)` in CudaGraphRunner, the traceback's last line (sglang#4205)
    log = b"""Traceback (most recent call last):
  File "/x/sglang/srt/model_executor/model_runner.py", line 741, in init_cuda_graphs
    self.cuda_graph_runner = CudaGraphRunner(self)
  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 239, in __init__
    raise Exception(
Exception: Capture cuda graph failed: connection closed
"""
    report = analyze_bytes(log)
    # THEN its error is the exception's line, not the traceback's first
    assert report.failure is not None and report.failure.phase == "cuda-graph"
    assert report.error is not None and report.error.startswith("Exception: Capture cuda graph failed")


def test_the_raise_statement_stands_in_for_an_error_line_below_the_cut() -> None:
    # GIVEN a traceback tail cut after the statement that raised (vllm#27508)
    tag = "(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708]"
    log = f"""{tag}   File "/x/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory
{tag}     raise ValueError("No available memory for the cache blocks. "
{tag}                      "Try increasing `gpu_memory_utilization` when "
(EngineCore_DP0 pid=1) ERROR 10-25
""".encode()
    report = analyze_bytes(log)
    # THEN the failure is the KV cache's sizing, and what it says is the raise statement, marked as such
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase, report.failure.model) == ("DP0", "kv-cache", "target")
    assert report.error is not None and "No available memory for the cache blocks" in report.error
    assert "the statement that raised it" in report.failure.error


@pytest.mark.parametrize(
    "frame",
    [
        'File "/x/vllm/worker/worker.py", line 493, in raise_if_cache_size_invalid',
        'File "/x/vllm/v1/core/kv_cache_utils.py", line 1243, in get_kv_cache_configs',
        'File "/x/vllm/v1/core/kv_cache_planning.py", line 224, in check_enough_kv_cache_memory',
    ],
)
def test_vllms_cache_sizing_frames_name_the_kv_cache(frame: str) -> None:
    log = f"""ERROR 11-18 18:07:28 engine.py:366] Traceback (most recent call last):
ERROR 11-18 18:07:28 engine.py:366]   {frame}
ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks.
""".encode()
    report = analyze_bytes(log)
    assert report.failure is not None and report.failure.phase == "kv-cache"


def test_zero_gpu_blocks_is_the_kv_cache_failing_not_its_end() -> None:
    # GIVEN V0 (QAnything's FastChat around vLLM ~0.3): zero blocks, then a traceback cut in its first frame
    log = b"""INFO 04-27 10:11:03 llm_engine.py:70] Initializing an LLM engine with config: model='/m', tp=1
INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256
2024-04-27 10:13:05 | ERROR | stderr | Traceback (most recent call last):
"""
    report = analyze_bytes(log)
    assert report.state == "failed"
    assert report.failure is not None and (report.failure.phase, report.failure.model) == (
        "kv-cache",
        "target",
    )
    # and a V0 boot with blocks to spare ends the phase there, as before
    ok = analyze_bytes(log.replace(b"# GPU blocks: 0,", b"# GPU blocks: 2048,").rsplit(b"\n", 2)[0] + b"\n")
    kv = [phase for phase in ok.phases if phase.name == "kv-cache"]
    assert kv and kv[0].end is not None


def test_loading_model_from_scratch_after_starting_to_load_is_one_load() -> None:
    # GIVEN V1 0.10's load_model: "Starting to load model", then "Loading model from scratch..." (gfx906#45)
    lines = []
    for rank in (0, 1):
        tag = f"(Worker_TP{rank} pid={100 + rank}) INFO 10-02 11:32:0{4 + rank}"
        lines.append(f"{tag} [gpu_model_runner.py:2338] Starting to load model /m...")
        lines.append(f"{tag} [gpu_model_runner.py:2370] Loading model from scratch...")
    report = analyze_bytes(("\n".join(lines) + "\n").encode())
    # THEN each rank is loading the target, and no draft appears
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [
        ("load-weights", "target", 2)
    ]
    # and the V2 model runner's line alone still begins the load
    alone = analyze_bytes(
        b"(Worker_TP0 pid=1) INFO 10-02 11:32:05 [gpu.py:1] Loading model from scratch...\n"
    )
    assert [(phase.name, phase.model) for phase in alone.phases] == [("load-weights", "target")]


def test_a_notebooks_links_in_a_bar_are_read_as_its_text() -> None:
    # GIVEN Jupyter's rendering of a loader bar (vllm#9163): "1/5" became "1[/5](http://host:8888/5)"
    frame = (
        b"Loading safetensors checkpoint shards:  20% Completed | 1[/5](http://98.84.183.65:8888/5) "
        b"[00:00<00:00,  7.40it[/s](http://98.84.183.65:8888/s)]"
    )
    assert (
        unlink(frame)
        == b"Loading safetensors checkpoint shards:  20% Completed | 1/5 [00:00<00:00,  7.40it/s]"
    )
    log = (
        b"INFO 10-08 17:37:09 weight_utils.py:242] Using model weights format ['*.safetensors']\n"
        + frame
        + b"\n"
    )
    report = analyze_bytes(log)
    # THEN the bar counts, and the log is vLLM's by its record form (the only record is in it)
    assert report.framework == "vllm"
    assert [(bar.desc, bar.done, bar.total) for bar in report.progress] == [
        ("Loading safetensors checkpoint shards", 1, 5)
    ]
    # a block without a link is handed back as it is
    plain = log.replace(frame, b"")
    assert unlink(plain) is plain


def test_vllms_v1_engine_words_say_which_engine_wrote_a_paste_of_bars() -> None:
    log = b"""INFO 07-10 20:54:47 [cuda.py:252] Using Flash Attention backend on V1 engine.
Loading safetensors checkpoint shards:   0% Completed | 0/8 [00:00<?, ?it/s]
Loading safetensors checkpoint shards:  12% Completed | 1/8 [00:00<00:02,  2.34it/s]
"""
    assert analyze_bytes(log).framework == "vllm"


def test_an_api_server_process_tag_is_vllms_and_no_rank() -> None:
    # GIVEN vLLM's --api-server-count processes ("ApiServer_5"), crashing during the load (vllm#35547)
    log = b"""Loading safetensors checkpoint shards:  65% Completed | 106/163 [09:36<05:20,  5.63s/it]
(ApiServer_5 pid=463645) Process ApiServer_5:
(ApiServer_5 pid=463645) Traceback (most recent call last):
"""
    report = analyze_bytes(log)
    assert report.framework == "vllm"
    assert report.failure is not None and report.failure.rank == ""
