"""Which engine wrote a log is decided from what the log holds, not only from record prefixes (#33 item 1): a
paste that is only a traceback still names the engine's modules."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes

SGLANG_FAULT = b"""Current thread 0x000079795dbe4740 (most recent call first):
  File "/env/lib/python3.12/site-packages/sglang/srt/layers/linear.py", line 1254 in weight_loader
  File "/env/lib/python3.12/site-packages/sglang/srt/models/qwen3.py", line 318 in load_weights
"""
VLLM_TORCH_RANK_TRACEBACK = b"""[rank0]:   File "/env/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py", line 642, in from_engine_args
[rank0]:     engine = cls(
[rank0]:   File "/env/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 271, in __init__
[rank0]:     self.model_executor = executor_class(vllm_config=vllm_config, )
"""


def test_a_traceback_alone_names_its_engine_by_its_module_paths() -> None:
    assert analyze_bytes(SGLANG_FAULT).framework == "sglang"
    report = analyze_bytes(VLLM_TORCH_RANK_TRACEBACK)
    # AND the engine's own frames are a failure even when none of them says which phase it was in
    assert (report.framework, report.state) == ("vllm", "failed")


def test_module_paths_do_not_outweigh_the_records_of_the_other_engine() -> None:
    # GIVEN an SGLang boot whose traceback runs through vLLM's modules (SGLang 0.3 imported vLLM's layers)
    log = b"""[2024-10-10 22:30:32 TP0] Load weight begin. avail mem=191.33 GB
Traceback (most recent call last):
  File "/env/vllm/model_executor/layers/linear.py", line 10, in weight_loader
  File "/env/vllm/model_executor/layers/linear.py", line 11, in weight_loader
  File "/env/vllm/model_executor/layers/linear.py", line 12, in weight_loader
AssertionError
"""
    assert analyze_bytes(log).framework == "sglang"


def test_an_untagged_bar_before_the_first_tagged_record_is_global_rank_zeros() -> None:
    # GIVEN an SGLang excerpt that starts inside the load: the bar (untagged, drawn by TP0) comes first
    log = b"""Loading safetensors checkpoint shards:  50% Completed | 2/4 [02:56<02:57, 88.81s/it]
Loading safetensors checkpoint shards: 100% Completed | 4/4 [05:42<00:00, 85.53s/it]
[2025-03-29 18:18:34 TP0] Load weight end. type=Gemma3ForConditionalGeneration, avail mem=3.64 GB
"""
    # THEN one rank loaded, not an untagged one beside TP0
    phases = analyze_bytes(log).phases
    assert [(phase.name, phase.model, phase.ranks) for phase in phases] == [("load-weights", "target", 1)]


def test_vllm_process_tags_alone_name_the_engine() -> None:
    # GIVEN bars whose worker tag a paste put on a line of its own: no record, no timestamp
    log = (
        b"Loading safetensors checkpoint shards:  26% Completed | 22/85 [09:23<29:54, 28.49s/it]\n"
        b"(Worker_TP0 pid=1700) \n"
        b"Loading safetensors checkpoint shards:  27% Completed | 23/85 [09:54<29:59, 29.02s/it]\n"
    )
    report = analyze_bytes(log)
    assert (report.framework, report.state) == ("vllm", "load-weights")


def test_the_v2_model_runner_starts_its_load_in_its_own_words() -> None:
    log = b"(Worker pid=29271) INFO 08-19 17:59:46 [model_runner.py:284] Loading model from scratch...\n"
    report = analyze_bytes(log)
    assert (report.state, [phase.name for phase in report.phases]) == ("load-weights", ["load-weights"])


def test_a_boot_record_relayed_twice_is_one_record() -> None:
    # GIVEN Ray relaying a worker's record with and without the outer tags
    log = b"""(RayWorkerProc pid=29271) (Worker pid=29271) INFO 08-19 17:59:46 [model_runner.py:284] Starting to load model m...
(ServeReplica:x pid=28488) (EngineCore pid=29087) (RayWorkerProc pid=29271) (Worker pid=29271) INFO 08-19 17:59:46 [model_runner.py:284] Starting to load model m...
"""
    phases = analyze_bytes(log).phases
    assert [(phase.name, phase.model, phase.ranks) for phase in phases] == [("load-weights", "target", 1)]


def test_an_sglang_server_whose_uvicorn_started_is_up_until_something_says_otherwise() -> None:
    # GIVEN an SGLang TP1 boot (untagged records) cut after uvicorn's startup lines, before the warm-up's message
    boot = b"""[2025-07-01 15:50:48] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=22.19 GB
[2025-07-01 15:50:48] KV Cache is allocated. #tokens: 151244, K size: 9.23 GB, V size: 9.23 GB
[2025-07-01 15:50:48] Memory pool end. avail mem=3.59 GB
[2025-07-01 15:50:49] INFO:     Application startup complete.
[2025-07-01 15:50:49] INFO:     Uvicorn running on http://0.0.0.0:5001 (Press CTRL+C to quit)
"""
    report = analyze_bytes(boot)
    assert report.state == "ready"
    assert [phase.name for phase in report.phases] == ["load-weights", "kv-cache", "ready"]
    # AND a warm-up that fails after it still fails the boot
    failed = analyze_bytes(boot + b"[2025-07-01 15:50:55] Initialization failed. warmup error: boom\n")
    assert failed.state == "failed"


def test_sglangs_own_record_prefix_says_sglang_when_no_message_is_known() -> None:
    log = b"[2026-04-16 01:02:09 TP1] a fork's own words\n[2026-04-16 01:02:10 TP0] more of them\n"
    assert analyze_bytes(log).framework == "sglang"
    # Without the rank tags the bracket is any logger's: no evidence.
    assert analyze_bytes(log.replace(b" TP1]", b"]").replace(b" TP0]", b"]")).framework == "unknown"


@pytest.mark.parametrize("lead", [b"", b"    ", b"\x1b[32m", b"\t\x1b[1m"])
def test_sglangs_record_prefix_counts_on_a_logs_first_line_too(lead: bytes) -> None:
    """The prefix is looked for from the line break before each line: a log's first line has none, and still
    counts (a one-line excerpt, indented or coloured as a paste leaves it)."""
    assert analyze_bytes(lead + b"[2026-04-16 01:02:09 DP0 TP1] a fork's own words\n").framework == "sglang"
    assert analyze_bytes(lead + b"[01:02:09 TP1] a fork's own words").framework == "sglang"
