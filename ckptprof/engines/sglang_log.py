"""What SGLang's boot records mean, per release line (records from every release since 2024 are listed).

Format of a record: ``[%Y-%m-%d %H:%M:%S{.ms}{ DPn}{ PPn}{ TPn}{ EPn}] message``; the launcher's records carry
no rank tag, and neither do a TP1 server's. A rank's second ``Load weight begin`` belongs to the EAGLE draft
when ``speculative_algorithm`` is set. Order of the table matters: the first needle found wins, so the longer
``Capture draft extend cuda graph`` comes before ``Capture cuda graph``.
"""

from __future__ import annotations

import re

from ckptprof.engines.log_rules import (
    Begin,
    Capture,
    Configure,
    End,
    EngineLog,
    Evidence,
    Fail,
    FrameRule,
    Ready,
    Rule,
)

# "Capture <model> <variant> <CUDA|NPU|CPU|XPU|cuda> graph begin": the variant is the pass (decode, verify,
# prefill, extend); the device word varies with the platform.
_GRAPH_BEGIN = {
    model: re.compile(rf"Capture {model} (?P<variant>\w+) \w+ graph begin") for model in ("target", "draft")
}
_GRAPH_END = {
    model: re.compile(rf"Capture {model} (?P<variant>\w+) \w+ graph end") for model in ("target", "draft")
}

RECORDS: tuple[Rule, ...] = (
    Rule("ServerArgs(", Configure(), weight=5),
    # Logged again by the draft's model runner (model_runner.py's init_torch_distributed, whose group set-up the draft
    # skips): that rank's second is the draft's.
    Rule("Init torch distributed begin", Begin("init", "init-distributed", None, again_variant="draft")),
    Rule("Init nccl begin", Begin("init", "init-distributed", None)),  # 0.3's name for it
    Rule("Init torch distributed ends", End("init", "init-distributed", None)),
    # 0.5.21 on: the process groups are built in distributed/bootstrap.py's init_parallel_runtime, which logs these
    # instead ("Init parallel ends. elapsed=0.52 s"); 0.5.20 still logs the two above.
    Rule("Init parallel begin", Begin("init", "init-distributed", None, awaits="`Init parallel ends`")),
    Rule("Init parallel ends", End("init", "init-distributed", None)),
    # pynccl's version line, printed inside init-distributed: the phase's evidence in an excerpt or a release whose
    # begin record is not there (sglang-sglang-12496).
    Rule("sglang is using nccl", Begin("init", "init-distributed", None, unless_open=True)),
    Rule("Load weight begin", Begin("load", "load-weights", "nth")),
    # 0.5.23's --startup-weight-load-mode=overlap (startup_weight_load.py; TP1 and TP2, no speculative decoding): a
    # capture-safe model is built, the checkpoint is then read in the background while the KV pool is built and the
    # CUDA graphs are captured, and `Load weight end. Committed real weights after CUDA graph capture in ...` ends the
    # load (the usual `Load weight end. elapsed=` is not logged).
    Rule("Started checkpoint prefetching", Begin("load", "load-weights", "nth", in_background=True)),
    Rule("Load weight end", End("load", "load-weights", "nth")),
    Rule("KV Cache is allocated", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    # Pools that log their own line instead (DeepSeek V4's, hybrid models' Mamba state): the same phase.
    Rule("TokenToKVPool with", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    Rule("Mamba Cache is allocated", Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True)),
    # The kvcached plugin (elastic KV cache, ovg-project/kvcached) sets up its own allocator in place of SGLang's pool
    # and logs that instead, in its own `[kvcached][INFO][time][file:line]` form (sglang-kvcached-198).
    Rule(
        "Init kvcached KV cache allocator",
        Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True),
    ),
    Rule("Memory pool end", End("kv", "kv-cache", "nth")),
    Rule(
        "Capture draft extend cuda graph begin", Begin("graph-draft-extend", "cuda-graph", "draft", "extend")
    ),
    Rule("Capture draft extend cuda graph end", End("graph-draft-extend", "cuda-graph", "draft", "extend")),
    Rule("Capture draft cuda graph begin", Begin("graph-draft", "cuda-graph", "draft")),
    Rule("Capture draft cuda graph end", End("graph-draft", "cuda-graph", "draft")),
    # 0.5.9's piecewise graphs (model_runner.py, init_piecewise_cuda_graphs): captured after the others, or alone.
    Rule("Capture piecewise CUDA graph begin", Begin("graph-piecewise", "cuda-graph", "nth", "piecewise")),
    Rule("Capture piecewise CUDA graph end", End("graph-piecewise", "cuda-graph", "nth", "piecewise")),
    Rule("Capture cuda graph begin", Begin("graph", "cuda-graph", "nth")),
    Rule("Capture cuda graph end", End("graph", "cuda-graph", "nth")),
    # The same step on other devices: model_runner.py names it after the device's graph kind (0.5.9's graph_backend:
    # `Capture npu graph begin.` on Ascend, `cpu graph` on CPU).
    Rule("Capture npu graph begin", Begin("graph", "cuda-graph", "nth", awaits="`Capture npu graph end`")),
    Rule("Capture npu graph end", End("graph", "cuda-graph", "nth")),
    Rule("Capture cpu graph begin", Begin("graph", "cuda-graph", "nth", awaits="`Capture cpu graph end`")),
    Rule("Capture cpu graph end", End("graph", "cuda-graph", "nth")),
    # 0.5.x: one graph set per model and pass, named by the device's graph kind (`Capture target decode CUDA
    # graph begin.`, `Capture target verify NPU graph end.`, `Capture draft extend CUDA graph begin.`).
    Rule("Capture target ", Begin("graph-target", "cuda-graph", "target"), pattern=_GRAPH_BEGIN["target"]),
    Rule("Capture target ", End("graph-target", "cuda-graph", "target"), pattern=_GRAPH_END["target"]),
    Rule("Capture draft ", Begin("graph-draft", "cuda-graph", "draft"), pattern=_GRAPH_BEGIN["draft"]),
    Rule("Capture draft ", End("graph-draft", "cuda-graph", "draft"), pattern=_GRAPH_END["draft"]),
    Rule("Capture UNO tree draft CUDA graph begin", Begin("graph-draft-uno", "cuda-graph", "draft", "uno")),
    Rule("Capture UNO tree draft CUDA graph end", End("graph-draft-uno", "cuda-graph", "draft", "uno")),
    Rule(
        "Capture Frozen-KV MTP draft cuda graph begin", Begin("graph-draft-mtp", "cuda-graph", "draft", "mtp")
    ),
    Rule("Capture Frozen-KV MTP draft cuda graph end", End("graph-draft-mtp", "cuda-graph", "draft", "mtp")),
    Rule("The server is fired up and ready to roll", Ready()),
    # uvicorn is up; the warm-up request and its message come after (a log cut before them: up, until it fails).
    Rule("Application startup complete", Ready(when_leading=True, until_more=True), weight=0),
    # The scheduler's decode statistics (scheduler_metrics_mixin.py in 0.5.9, metrics_reporter.py in 0.5.23: "Decode
    # batch, #running-req: ..."), logged every 40 decode steps by default: more than the warm-up request's 8 tokens, so
    # only while requests are served. A node of a multi-node server prints no ready line of its own (batch 57's Ascend
    # decode node) and still serves. No words of the engine's own weight. Logged on every rank, often: read only
    # until the boot is ready.
    Rule("Decode batch", Ready(served=True, requests=True, until_ready=True), weight=0),
    # bench_one_batch (bench_latency before 0.4) boots the engine in its own process, with no HTTP server and no ready
    # line, then prints each batch's latency ("Prefill. latency: 0.30282 s, throughput: ..."): the engine is serving
    # its prompts, as vLLM's offline engine is once its `Processed prompts` bar is drawn (batch 69).
    Rule("Prefill. latency: ", Ready(served=True, until_ready=True), weight=0),
    # The warm-up request after uvicorn's `Application startup complete` (http_server.py, _wait_and_warmup): the model's
    # information asked for (0.5.x releases that still asked the deprecated `/get_model_info` log its warning), then a
    # prefill of a few tokens. Seen after the HTTP server came up and before the ready line, they say the server is not
    # ready yet (a log cut in its warm-up). Read only until the boot is ready: a serving server logs a prefill line for
    # every batch. uvicorn's access lines are no record of the engine's (untimed, behind uvicorn's own prefix).
    Rule("Endpoint '/get_model_info' is deprecated", Ready(warming=True, until_ready=True), weight=0),
    Rule("Prefill batch", Ready(warming=True, until_ready=True), weight=0),
    # Under PD disaggregation the warm-up is a request of its own (http_server.py, _wait_and_warmup: "Start of pd
    # disaggregation warmup ..."), after uvicorn is up; the server is up once it returns (batch 62: a decode server
    # whose warm-up hung until its watchdog killed it read as ready).
    Rule("Start of pd disaggregation warmup", Ready(warming=True), weight=0),
    Rule("Loading safetensors using Fastsafetensor loader", Capture("loader", value="fastsafetensors")),
    # 0.5.2x's summary of the boot, by the main process once the schedulers are up (entrypoints/engine.py,
    # _set_startup_time): each step's duration as the schedulers measured it, which a tail excerpt may hold alone.
    Rule(
        "Engine startup timings (s): ",
        Capture("startup_timings", re.compile(r"Engine startup timings \(s\): (.+)")),
    ),
    Rule("Scheduler hit an exception", Evidence()),
    # ServerArgs' own warning under --enable-dp-attention (server_args.py in 0.5.9, arg_groups/parallel_hook.py in
    # 0.5.23, read in the registry's packages), printed before any record of the boot: an offline Engine's paste may
    # hold it beside vLLM-form lines of the modules SGLang imports and no line in SGLang's own form. vLLM has no such words.
    Rule("DP attention is enabled", Evidence(), weight=3),
    # ModelConfig's warning for an FP8 checkpoint whose scales are not UE8M0 while DeepGEMM is on (configs/model_config.py
    # in 0.5.9), printed before the boot's records (batch 58's excerpt holds it alone). vLLM has no such words.
    Rule("DeepGemm is enabled but the scale_fmt of checkpoint", Evidence(), weight=3),
    Rule("Initialization failed. warmup error", Fail("the warmup request")),
    # uvicorn cannot listen on the server's port ("ERROR:    [Errno 98] error while attempting to bind on address
    # ('127.0.0.1', 30000): address already in use") and shuts the HTTP server down: the server never serves, and the
    # warm-up request that fails minutes later fails for it (batch 63: a port an earlier server still held).
    Rule("error while attempting to bind on address", Fail("the HTTP server's start (its port)")),
    # The scheduler's watchdog (scheduler.py's watchdog_thread; scheduler_runtime_checker_mixin.py in 0.5.6): a forward
    # batch made no progress for --watchdog-timeout seconds, so it logs this, dumps the schedulers' stacks and sends
    # its parent SIGQUIT, which ends the server.
    Rule(
        "Watchdog timeout (self.watchdog_timeout=", Fail("a forward batch the scheduler's watchdog timed out")
    ),
)

END_MARKERS = {
    "init": "`Init torch distributed ends`",
    "load": "`Load weight end`",
    "kv": "`Memory pool end`",
    "graph": "`Capture cuda graph end`",
    "graph-draft": "`Capture draft cuda graph end`",
    "graph-draft-extend": "`Capture draft extend cuda graph end`",
    **{
        f"graph-{model}-{variant}": f"`Capture {model} {variant} CUDA graph end`"
        for model in ("target", "draft")
        for variant in ("decode", "verify", "prefill")
    },
    "graph-draft-uno": "`Capture UNO tree draft CUDA graph end`",
    "graph-draft-mtp": "`Capture Frozen-KV MTP draft cuda graph end`",
}

# Innermost match wins: a traceback lists the outermost frame first.
FRAMES: tuple[FrameRule, ...] = (
    FrameRule("init_torch_distributed", "init-distributed", None, None),
    FrameRule("in load_model", "load-weights", None, None),
    FrameRule("in load_weights", "load-weights", None, None),
    FrameRule("in _get_weights_iterator", "load-weights", None, None),
    FrameRule("weight_utils.py", "load-weights", None, None),
    # Building the model's layers allocates their weights: only the load builds them, so a traceback cut below
    # its load frame still names the phase.
    FrameRule("in create_weights", "load-weights", None, "model construction"),
    FrameRule("in init_memory_pool", "kv-cache", None, None),
    FrameRule("in profile_max_num_token", "kv-cache", None, "KV cache sizing"),
    FrameRule("in init_cuda_graphs", "cuda-graph", None, None),
    FrameRule("cuda_graph_runner.py", "cuda-graph", None, None),
    # torch.cuda.graph's own frames: a CUDA graph is being captured, whatever the engine's frames above were cut
    # to (vLLM's piecewise capture runs under its compilation backend's __call__, not under capture_model).
    FrameRule("in capture_begin", "cuda-graph", None, None),
    FrameRule("in capture_end", "cuda-graph", None, None),
    FrameRule("speculative/eagle", None, "draft", "draft worker init"),
    FrameRule("speculative/multi_layer_eagle", None, "draft", "draft worker init"),
    FrameRule("speculative/standalone_worker", None, "draft", "draft worker init"),
    FrameRule("draft_worker", None, "draft", "draft worker init"),
    # Any other frame of SGLang's: says only that SGLang was running (the module path is the evidence).
    FrameRule("/sglang/srt/", None, None, None),
)

# The graph runners' own raise on a failed capture (`raise Exception(f"Capture cuda graph failed: {e}\n...")`, read in
# the 0.5.9 and 0.5.23 packages: model_executor/cuda_graph_runner.py, runner/decode_ and prefill_cuda_graph_runner.py,
# cpu_graph_runner.py, and the EAGLE draft's runners, which raise the same words as the target's; the frozen-KV MTP
# runner is a draft's only).
ERROR_WORDS: tuple[FrameRule, ...] = (
    FrameRule("Capture frozen-KV MTP cuda graph failed", "cuda-graph", "draft", None),
    FrameRule("Capture cuda graph failed", "cuda-graph", None, None),
    FrameRule("Capture prefill CUDA graph failed", "cuda-graph", None, None),
    FrameRule("Capture CPU graph failed", "cuda-graph", None, None),
)

MODULE_PATHS = ("/sglang/srt/",)

LOG = EngineLog(
    name="sglang",
    title="SGLang",
    records=RECORDS,
    end_markers=END_MARKERS,
    frames=FRAMES,
    error_words=ERROR_WORDS,
    size_keys={"tp": ("tp_size",), "pp": ("pp_size",), "dp": ("dp_size",)},
    # `Load weight end. type=LlamaForCausalLMEagle3`: the architecture names the draft.
    draft_pattern=re.compile(r"\btype=\w*(?:Eagle|NextN|MTP)", re.ASCII),
    module_paths=MODULE_PATHS,
    # Date or not, a time and the rank's parallel tags in one bracket (a paste may indent or colour it): no vLLM
    # release writes this form.
    record_prefix=re.compile(
        rb"\n[ \t]*(?:\x1b\[[0-9;]*m)*"
        rb"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: (?:DP|PP|EP|TP)\d{1,5}){1,4}\] "
    ),
    # Older releases import vLLM's model code, whose logger writes vLLM's records in SGLang's processes
    # (sglang-MI300-testing-bench-latency: `WARNING 10-10 22:30:30 rocm.py:13] ...` above `[22:30:32 TP0]`).
    imported_loggers=("vllm",),
    draft_framed_steps=("load-weights", "kv-cache", "cuda-graph"),
)

# In ServerArgs(...): DP attention ranks split one TP group, so the world is not tp * dp.
DP_ATTENTION = "enable_dp_attention=True"
