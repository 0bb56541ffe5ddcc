"""Batch 54 (reports/cpu/2026-12-06o-bootlog-unseen): the report names the model the server serves (six of the
batch's seven vLLM answers looked for it in the summary), and SGLang's DP-attention warning is evidence of SGLang (an
offline Engine's paste whose only records are vLLM-form lines of the modules SGLang imports, sglang#4648)."""

from __future__ import annotations

import json

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.actions import model_named
from ckptprof.cli.log_cmd import render_text

# Each line as a release writes it (the corpus's logs), and the model it names.
NAMED = [
    # vLLM 0.8 on: the API server's arguments
    (
        "non-default args: {'model_tag': 'unsloth/Qwen3-0.6B-GGUF:IQ1_S', 'model': 'unsloth/Qwen3-0.6B-GGUF:IQ1_S', "
        "'speculative_config': {'model': 'draft/eagle3', 'method': 'eagle3'}}",
        "unsloth/Qwen3-0.6B-GGUF:IQ1_S",
    ),
    # vLLM V0 and V1: the load's first record
    ("Starting to load model models/Qwen2.5-72B-Instruct-FP8...", "models/Qwen2.5-72B-Instruct-FP8"),
    # SGLang's server arguments, with a draft named after the served model
    (
        "server_args=ServerArgs(model_path='/data/kimi-k2-instruct', tokenizer_path='/data/kimi-k2-instruct', "
        "speculative_draft_model_path='/data/eagle3-draft', tp_size=8)",
        "/data/kimi-k2-instruct",
    ),
    # a JSON dump of the arguments
    (
        'args: {"max_num_seqs": 5, "model": "nvidia/Qwen3.6-35B-A3B-NVFP4", "model_tag": "x"}',
        "nvidia/Qwen3.6-35B-A3B-NVFP4",
    ),
]


@pytest.mark.parametrize(("message", "model"), NAMED)
def test_the_served_model_is_read_from_what_names_it(message: str, model: str) -> None:
    assert model_named(message) == model


@pytest.mark.parametrize(
    "message",
    [
        "speculative_draft_model_path='/data/eagle3-draft', tp_size=8",  # a draft's, alone on its line
        "Loading drafter model...",
        "draft_model='x' served_model_name=y",
        "Load weight begin. avail mem=78.00 GB",
    ],
)
def test_no_model_is_read_where_none_is_the_served_one(message: str) -> None:
    assert model_named(message) is None


SGLANG_DRAFT_BOOT = b"""[2025-11-29 10:00:00] server_args=ServerArgs(model_path='/data/kimi-k2-instruct', speculative_draft_model_path='/data/eagle3-draft', tp_size=1, speculative_algorithm='EAGLE3')
[2025-11-29 10:00:01 TP0] Load weight begin. avail mem=78.00 GB
"""


def test_the_report_names_the_served_model_not_the_drafts() -> None:
    """GIVEN an SGLang server whose arguments name a target and a draft WHEN its log is read THEN the summary, the
    JSON and the text's first line name the target, and the state's line does not repeat it."""
    report = analyze_bytes(SGLANG_DRAFT_BOOT)
    assert report.model_name == "/data/kimi-k2-instruct"
    assert report.summary.endswith(" [model /data/kimi-k2-instruct]")
    assert json.loads(json.dumps(report.to_dict()))["model_name"] == "/data/kimi-k2-instruct"
    text = render_text(report, "server.log").splitlines()
    assert text[0].startswith("server.log: SGLang boot log of /data/kimi-k2-instruct, ")
    state = next(line for line in text if line.startswith("state: "))
    assert "[model" not in state


def test_a_restart_names_its_own_model() -> None:
    """GIVEN two vLLM starts in one file, each with its own model WHEN read THEN the report (the last start's) names
    the second's model, and a start that names none is not given the first's."""
    first = b"INFO 05-07 09:07:23 [utils.py:233] non-default args: {'model': 'a/first'}\n"
    first += b"INFO 05-07 09:07:41 [gpu_model_runner.py:4735] Starting to load model a/first...\n"
    second = b"INFO 05-07 09:09:23 [utils.py:233] non-default args: {'model': 'b/second'}\n"
    assert analyze_bytes(first + second).model_name == "b/second"
    unnamed = b"INFO 05-07 09:09:23 [utils.py:233] non-default args: {'host': '0.0.0.0'}\n"
    report = analyze_bytes(first + unnamed)
    assert report.boots == 2 and report.model_name is None


OFFLINE_DP_ATTENTION = b"""INFO 03-21 07:13:08 __init__.py:190] Automatically detected platform cuda.
DP attention is enabled. The chunked prefill size is adjusted to 4096 to avoid MoE kernel issues.
INFO 03-21 07:13:19 __init__.py:190] Automatically detected platform cuda.
Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.12s/it]
"""


def test_sglangs_dp_attention_warning_says_the_log_is_sglangs() -> None:
    """GIVEN an offline Engine's paste: vLLM-form lines of the modules SGLang imports, SGLang's DP-attention warning and
    a loader's bar WHEN read THEN it is SGLang's boot, loading its weights."""
    report = analyze_bytes(OFFLINE_DP_ATTENTION)
    assert (report.framework, report.state) == ("sglang", "load-weights")
    without = analyze_bytes(OFFLINE_DP_ATTENTION.replace(b"DP attention is enabled. ", b""))
    assert without.framework != "sglang"


def test_a_load_names_the_model_where_no_configuration_was_logged() -> None:
    """GIVEN a V0 worker's excerpt that opens at its load (vllm#14075: no arguments logged) WHEN read THEN the load's
    first record names the model."""
    log = (
        b"(VllmWorkerProcess pid=216) INFO 03-01 07:34:33 model_runner.py:1110] Starting to load model "
        b"models/Qwen2.5-72B-Instruct-FP8...\n"
    )
    assert analyze_bytes(log).model_name == "models/Qwen2.5-72B-Instruct-FP8"
