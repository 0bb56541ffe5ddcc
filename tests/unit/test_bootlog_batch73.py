"""Batch 73 (reports/cpu/2026-12-07s-bootlog-unseen): Llumnix's vLLM worker on Ray.

- Llumnix marks each line of the worker it runs with the worker's rank and world, glued to the level
  (`(RayWorkerWrapper pid=287638) [0/1]INFO 07-16 11:51:48.981 [...] Starting to load model ...`): the record follows.
- Ray prints the worker's tag, then tqdm's frame begins with a carriage return
  (`(RayWorkerWrapper pid=287638) \\rLoading safetensors checkpoint shards: ...`): the frame is that worker's.
- Ray forwards the worker's bars before its INFO lines: the capture's bar opens the step ahead of the load's and the KV
  cache's records, and the capture's end (`Graph capturing finished in 9 secs`) says it ran after them.
"""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record

TAG = "(RayWorkerWrapper pid=287638) "
CORE = "(Llumlet pid=287181) "


def _bar(desc: str, done: int, total: int) -> str:
    return f"{TAG}\r{desc}: {100 * done // total:3d}% Completed | {done}/{total} [00:01<00:00,  1.69it/s]\n"


BARS = (
    f"{CORE}INFO 07-16 11:51:33.389 [core.py:73] Initializing a V1 LLM engine (v0.9.1) with config: model='/m', "
    "speculative_config=None, tokenizer='/m'\n"
    f"{TAG}INFO 07-16 11:51:41.368 [fa_utils.py:99] Set flash-attn version to 2\n"
    + "".join(_bar("Loading safetensors checkpoint shards", done, 4) for done in range(5))
    + "".join(_bar("Capturing CUDA graph shapes", done, 3) for done in range(4))
)
LINES = (
    f"{TAG}[0/1]INFO 07-16 11:51:48.981 [gpu_model_runner.py:1954] Starting to load model /m...\n"
    f"{TAG}[0/1]INFO 07-16 11:51:51.750 [default_loader.py:280] Loading weights took 2.43 seconds\n"
    f"{TAG}[0/1]INFO 07-16 11:51:56.265 [gpu_worker.py:257] Available KV cache memory: 2.96 GiB\n"
    f"{CORE}INFO 07-16 11:51:56.480 [kv_cache_utils.py:721] GPU KV cache size: 55,296 tokens\n"
    f"{TAG}[0/1]INFO 07-16 11:52:05.798 [gpu_model_runner.py:2575] Graph capturing finished in 9 secs, took 0.12 GiB\n"
)


def test_a_launchers_mark_between_the_tag_and_the_record_is_passed_over() -> None:
    record = parse_record(
        f"{TAG}[0/1]INFO 07-16 11:51:48.981 [gpu_model_runner.py:1954] Starting to load model /m"
    )
    assert (record.timestamp, record.level, record.pid, record.style) == (
        "07-16 11:51:48.981",
        "INFO",
        "287638",
        "vllm",
    )
    assert record.message == "Starting to load model /m"


def test_a_bracket_after_the_tag_that_leads_to_no_record_stays_the_message() -> None:
    record = parse_record(f"{TAG}[0/1] nothing here has a time")
    assert (record.timestamp, record.pid, record.message) == (None, "287638", "[0/1] nothing here has a time")


def test_a_bar_after_its_workers_tag_and_a_carriage_return_is_that_workers() -> None:
    report = analyze_bytes((BARS + LINES).encode())
    (load,) = [phase for phase in report.phases if phase.name == "load-weights"]
    # THEN the load counts one rank, the worker that drew its bar and logged its lines, and it ended
    assert load.ranks == 1
    assert load.end == "07-16 11:51:51.750"


def test_a_capture_drawn_before_the_steps_logged_after_it_is_ordered_by_its_end() -> None:
    report = analyze_bytes((BARS + LINES).encode())
    assert [phase.name for phase in report.phases] == ["load-weights", "kv-cache", "cuda-graph"]
    (graph,) = [phase for phase in report.phases if phase.name == "cuda-graph"]
    assert graph.start == "07-16 11:51:56.798"


def test_a_capture_bar_in_its_place_keeps_its_place() -> None:
    # GIVEN the same steps with the capture's bar where the capture ran: the order is the lines' order
    in_place = LINES.replace(
        f"{TAG}[0/1]INFO 07-16 11:52:05.798",
        "".join(_bar("Capturing CUDA graph shapes", done, 3) for done in range(4))
        + f"{TAG}[0/1]INFO 07-16 11:52:05.798",
    )
    report = analyze_bytes((BARS.split(f"{TAG}\rCapturing")[0] + in_place).encode())
    assert [phase.name for phase in report.phases] == ["load-weights", "kv-cache", "cuda-graph"]
