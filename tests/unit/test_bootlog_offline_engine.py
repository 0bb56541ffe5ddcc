"""vLLM's offline engine (`LLM(...)` in a script) and the process tags of a DP engine's only worker, which batch 19's
vllm-ascend#4037 showed the reader did not know (reports/cpu/2026-12-05h-bootlog-xfails/); the real logs are in
tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record

CORE = "(EngineCore_DP0 pid=271251) "
WORKER = CORE + "(Worker pid=271261) "
BOOT = [
    "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:00<00:00,  5.13it/s]",
    WORKER + "INFO 11-06 09:33:05 [default_loader.py:314] Loading weights took 0.58 seconds",
    WORKER + "INFO 11-06 09:33:06 [model_runner_v1.py:2947] Loading model weights took 3.2153 GB",
    CORE + "INFO 11-06 09:33:08 [kv_cache_utils.py:1201] GPU KV cache size: 415,104 tokens",
    CORE
    + "INFO 11-06 09:33:08 [core.py:241] init engine (profile, create kv cache, warmup model) took 1.97 seconds",
    "INFO 11-06 09:33:09 [llm.py:343] Supported tasks: ['generate']",
]


def _read(lines: list[str]) -> tuple[str, list[tuple[str, str | None, int]], str]:
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    return report.state, [(phase.name, phase.model, phase.ranks) for phase in report.phases], report.summary


@pytest.mark.parametrize(
    "served",
    [
        # tqdm's frame, as a parsed bar
        "Processed prompts: 100%|██████████| 1/1 [00:00<00:00,  4.48it/s, est. speed input: 26.9 toks/s]",
        "Adding requests: 100%|██████████| 1/1 [00:00<00:00, 66.29it/s]",
        # frames the bar reader does not take: a postfix longer than a rate, an unknown total (vllm-lmflow-942)
        "Processed prompts: 100%|████| 10/10 [00:31<00:00,  3.19s/it, est. speed input: 42.98 toks/s, output: 305.76 toks/s]",
        "Processed prompts: 0it [00:00, ?it/s, est. speed input: 0.00 toks/s, output: 0.00 toks/s]",
        # lm-eval driving the engine with the engine's bars off (batch 43: llm-compressor's evaluation)
        "Running generate_until requests:   0%|          | 2/1000 [00:02<19:03,  1.15s/it]",
        "Running loglikelihood requests: 100%|██████████| 10/10 [00:01<00:00,  9.12it/s]",
        # the engine's throughput while it serves (batch 43: an API server's stdout with no startup line)
        "INFO 11-06 09:33:20 [loggers.py:123] Engine 000: Avg prompt throughput: 69.3 tokens/s, Avg generation"
        " throughput: 34.8 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%",
    ],
)
def test_an_offline_engine_serving_prompts_is_ready_with_no_ready_step(served: str) -> None:
    # GIVEN an offline engine's boot, whose last record is the engine's init, and nothing says it is up
    state, phases, _ = _read(BOOT)
    assert state == "kv-cache"
    # WHEN the script's prompts are served
    state, served_phases, summary = _read([*BOOT, served])
    # THEN the engine is up, and no ready step is invented (no line says when it came up)
    assert state == "ready"
    assert served_phases == phases
    # ...as a script's prompts, or as a server's requests where its throughput lines say it serves (no offline run)
    assert ("serving requests" if "Avg prompt throughput" in served else "serving prompts") in summary


def test_a_failure_after_an_offline_engine_served_leaves_it_ready() -> None:
    lines = [
        *BOOT,
        "Processed prompts: 0it [00:00, ?it/s, est. speed input: 0.00 toks/s, output: 0.00 toks/s]",
        "Traceback (most recent call last):",
        '  File "/app/script.py", line 9, in <module>',
        "    print(outputs[0])",
        "IndexError: list index out of range",
    ]
    state, _, _ = _read(lines)
    assert state == "ready"


def test_a_dp_engines_only_worker_is_that_engines_rank() -> None:
    # GIVEN the boot above: the bars are untagged, the worker's records carry its engine's tag and its own, nameless
    _, phases, _ = _read(BOOT)
    # THEN the load is one rank's (DP0's), not the bar's rank and the worker's two
    assert ("load-weights", "target", 1) in phases
    assert parse_record(WORKER + "INFO 11-06 09:33:05 [x.py:1] words").rank == "DP0"


@pytest.mark.parametrize(
    ("prefix", "rank"),
    [
        # the innermost tag that names a rank names the process
        ("(APIServer pid=1) (EngineCore_DP1 pid=2) ", "DP1"),
        ("(EngineCore_DP0 pid=2) (Worker_TP3 pid=3) ", "TP3"),
        # a nameless worker inside a nameless process keeps its process id (Ray's wrappers)
        ("(RayWorkerProc pid=5) (Worker pid=6) ", "pid6"),
        ("(EngineCore pid=4) (RayWorkerProc pid=5) ", "pid5"),
        # Ray's workers inside a DP engine are several: each its own (dynamo#4941)
        ("(EngineCore_DP0 pid=1305) (RayWorkerWrapper pid=344, ip=10.2.30.130) ", "pid344"),
        ("(EngineCore_DP0 pid=1305) (RayWorkerWrapper pid=1480) ", "pid1480"),
    ],
)
def test_nested_process_tags(prefix: str, rank: str) -> None:
    assert parse_record(prefix + "INFO 11-06 09:33:05 [x.py:1] words").rank == rank


def test_a_served_tail_then_a_new_servers_configuration_reads_as_the_new_servers_boot() -> None:
    """GIVEN an excerpt that opens in a server's serving (its throughput lines, no step of its boot), then the next
    server's start and boot WHEN read THEN the configuration starts a boot of its own, and the second's ready step is
    its own, not lost to a boot that was ready already; the tail, whose server started above the excerpt, is no start
    the log holds, so the log holds one boot (the spec's count, batch 47's notebook cell of nine starts)."""
    served = "INFO 07-01 14:07:01 [loggers.py:123] Engine 000: Avg prompt throughput: 9.3 tokens/s, Running: 1 reqs"
    second = [
        "(APIServer pid=2) INFO 07-01 14:07:43 [api_utils.py:273] non-default args: {'model_tag': 'm'}",
        "(EngineCore pid=3) INFO 07-01 14:07:52 [gpu_model_runner.py:4118] Starting to load model m...",
        "(EngineCore pid=3) INFO 07-01 14:07:55 [default_loader.py:430] Loading weights took 1.52 seconds",
        "(APIServer pid=2) INFO 07-01 14:08:07 [api_server.py:1] Application startup complete.",
    ]
    report = analyze_bytes("".join(f"{line}\n" for line in [served, *second]).encode())
    assert report.boots == 1
    assert report.first_timestamp is not None and report.first_timestamp.endswith("14:07:43")
    assert report.state == "ready"
    assert [phase.name for phase in report.phases] == ["load-weights", "ready"]


@pytest.mark.parametrize(
    "before",
    [
        # a server configured and serving: a start of its own
        [
            "(APIServer pid=1) INFO 07-01 14:00:00 [api_utils.py:273] non-default args: {'model_tag': 'm'}",
            "INFO 07-01 14:07:01 [loggers.py:123] Engine 000: Avg prompt throughput: 9.3 tokens/s, Running: 1 reqs",
        ],
        # a server that crashed: its traceback is a boot of its own, whether or not its start is in the excerpt
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/vllm/entrypoints/api_server.py", line 1, in <module>',
            "RuntimeError: CUDA error: out of memory",
        ],
    ],
    ids=["configured-and-served", "crashed"],
)
def test_a_boot_that_holds_a_start_before_a_new_server_is_counted(before: list[str]) -> None:
    """GIVEN a server's configuration or crash, then the next server's start WHEN read THEN both are boots: only an
    excerpt's opening tail of serving alone is no start."""
    second = [
        "(APIServer pid=2) INFO 07-01 14:07:43 [api_utils.py:273] non-default args: {'model_tag': 'm'}",
        "(EngineCore pid=3) INFO 07-01 14:07:55 [default_loader.py:430] Loading weights took 1.52 seconds",
    ]
    report = analyze_bytes("".join(f"{line}\n" for line in [*before, *second]).encode())
    assert report.boots == 2
