"""What SGLang's boot records mean, per release line (records from every release since 2024 are listed).

Format of a record: ``[%Y-%m-%d %H:%M:%S{.ms}{ DPn}{ PPn}{ TPn}{ EPn}] message``; the launcher's records carry
no rank tag, and neither do a TP1 server's. A rank's second ``Load weight begin`` belongs to the EAGLE draft
when ``speculative_algorithm`` is set. Order of the table matters: the first needle found wins, so the longer
``Capture draft extend cuda graph`` comes before ``Capture cuda graph``.
"""

from __future__ import annotations

import re

from ckptprof.bootlog.rules import (
    Begin,
    Capture,
    Configure,
    End,
    Engine,
    Evidence,
    Fail,
    FrameRule,
    Ready,
    Rule,
)

RECORDS: tuple[Rule, ...] = (
    Rule("ServerArgs(", Configure(), weight=5),
    Rule("Init torch distributed begin", Begin("init", "init-distributed", None)),
    Rule("Init torch distributed ends", End("init", "init-distributed", None)),
    Rule("Load weight begin", Begin("load", "load-weights", "nth")),
    Rule("Load weight end", End("load", "load-weights", "nth")),
    Rule("KV Cache is allocated", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    # Pools that log their own line instead (DeepSeek V4's, hybrid models' Mamba state): the same phase.
    Rule("TokenToKVPool with", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    Rule("Mamba Cache is allocated", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    Rule("Memory pool end", End("kv", "kv-cache", "nth")),
    Rule(
        "Capture draft extend cuda graph begin", Begin("graph-draft-extend", "cuda-graph", "draft", "extend")
    ),
    Rule("Capture draft extend cuda graph end", End("graph-draft-extend", "cuda-graph", "draft", "extend")),
    Rule("Capture draft cuda graph begin", Begin("graph-draft", "cuda-graph", "draft")),
    Rule("Capture draft cuda graph end", End("graph-draft", "cuda-graph", "draft")),
    Rule("Capture cuda graph begin", Begin("graph", "cuda-graph", "nth")),
    Rule("Capture cuda graph end", End("graph", "cuda-graph", "nth")),
    # DFLASH speculative decoding (2026 releases): a graph set per model and pass.
    Rule(
        "Capture target prefill CUDA graph begin", Begin("graph-prefill", "cuda-graph", "target", "prefill")
    ),
    Rule("Capture target prefill CUDA graph end", End("graph-prefill", "cuda-graph", "target", "prefill")),
    Rule("Capture target verify CUDA graph begin", Begin("graph-verify", "cuda-graph", "target", "verify")),
    Rule("Capture target verify CUDA graph end", End("graph-verify", "cuda-graph", "target", "verify")),
    Rule(
        "Capture draft verify CUDA graph begin", Begin("graph-draft-verify", "cuda-graph", "draft", "verify")
    ),
    Rule("Capture draft verify CUDA graph end", End("graph-draft-verify", "cuda-graph", "draft", "verify")),
    Rule("The server is fired up and ready to roll", Ready()),
    Rule("Loading safetensors using Fastsafetensor loader", Capture("loader", value="fastsafetensors")),
    Rule("Scheduler hit an exception", Evidence()),
    Rule("Initialization failed. warmup error", Fail("the warmup request")),
    Rule("max_total_num_tokens=", Evidence()),
)

END_MARKERS = {
    "init": "`Init torch distributed ends`",
    "load": "`Load weight end`",
    "kv": "`Memory pool end`",
    "graph": "`Capture cuda graph end`",
    "graph-draft": "`Capture draft cuda graph end`",
    "graph-draft-extend": "`Capture draft extend cuda graph end`",
    "graph-prefill": "`Capture target prefill CUDA graph end`",
    "graph-verify": "`Capture target verify CUDA graph end`",
    "graph-draft-verify": "`Capture draft verify CUDA graph end`",
}

# Innermost match wins: a traceback lists the outermost frame first.
FRAMES: tuple[FrameRule, ...] = (
    FrameRule("init_torch_distributed", "init-distributed", None, None),
    FrameRule("in load_model", "load-weights", None, None),
    FrameRule("in load_weights", "load-weights", None, None),
    FrameRule("in _get_weights_iterator", "load-weights", None, None),
    FrameRule("weight_utils.py", "load-weights", None, None),
    FrameRule("in init_memory_pool", "kv-cache", None, None),
    FrameRule("in profile_max_num_token", "kv-cache", None, "KV cache sizing"),
    FrameRule("in init_cuda_graphs", "cuda-graph", None, None),
    FrameRule("cuda_graph_runner.py", "cuda-graph", None, None),
    FrameRule("speculative/eagle", None, "draft", "draft worker init"),
    FrameRule("speculative/multi_layer_eagle", None, "draft", "draft worker init"),
    FrameRule("speculative/standalone_worker", None, "draft", "draft worker init"),
    FrameRule("draft_worker", None, "draft", "draft worker init"),
)

ENGINE = Engine(
    name="sglang",
    title="SGLang",
    records=RECORDS,
    end_markers=END_MARKERS,
    frames=FRAMES,
    size_keys={"tp": ("tp_size",), "pp": ("pp_size",), "dp": ("dp_size",)},
    # `Load weight end. type=LlamaForCausalLMEagle3`: the architecture names the draft.
    draft_pattern=re.compile(r"\btype=\w*(?:Eagle|NextN|MTP)", re.ASCII),
)

# In ServerArgs(...): DP attention ranks split one TP group, so the world is not tp * dp.
DP_ATTENTION = "enable_dp_attention=True"
