"""What vLLM's boot records mean, V0 (2024) and V1 (2025 on).

Format: ``LEVEL MM-DD HH:MM:SS [file.py:line] message`` (the year is never printed), behind a worker prefix
``(VllmWorker rank=3 pid=1)``, ``(Worker_TP3 pid=1)``, ``(EngineCore_DP1 pid=1)`` or ``(RayWorkerWrapper pid=1)``
under multiprocessing or Ray. The drafter (EAGLE, MTP, draft model) loads after the target, in the same
workers, between ``Loading drafter model...`` and its own ``Loading weights took``.
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
    FrameRule,
    Ready,
    Rule,
)

# "torch.compile takes 7.14 s in total", "torch.compile took **3.79 s** in total" (a paste's bold kept)
_STATED_S = r" \**(\d{1,9}(?:\.\d{1,6})?) ?s\** in total"
_COMPILE_TOTAL_RE = re.compile(r"torch\.compile takes" + _STATED_S, re.ASCII)
_COMPILE_PART_RE = re.compile(r"torch\.compile took" + _STATED_S, re.ASCII)

RECORDS: tuple[Rule, ...] = (
    Rule(
        "API server version", Configure(restart="after-progress"), weight=3
    ),  # "vLLM API server version 0.9.2"
    # The engine's configuration: "Initializing an LLM engine (v0.5.4) with config: ..." (V0), "Initializing a V1 LLM
    # engine (v0.11.0) with config: ..." (V1). Not the dump of a failed step's input, which names the engine with its
    # configuration too ("Dumping input data for V1 LLM engine (v0.22.1) with config: ...", logging_utils/
    # dump_input.py), and restarts nothing.
    Rule(
        "LLM engine",
        Configure(restart="after-ready"),
        weight=2,
        pattern=re.compile(r"Initializing an? (?:V\d )?LLM engine"),
    ),
    # The API server's arguments ("non-default args: {...}": entrypoints/utils.py in 0.11, entrypoints/common/
    # startup.py in 0.34), logged where releases from 0.19 draw a banner instead of `vLLM API server version`.
    Rule("non-default args", Configure(restart="after-progress"), weight=3),
    # torch.distributed's world, per worker (distributed/parallel_state.py init_distributed_environment): logged at
    # INFO right before init_process_group from about 0.12 to 0.34 ("world_size=4 rank=0 local_rank=0
    # distributed_init_method=tcp://... backend=nccl"; a debug record in 0.11), and "Adjusting world_size=16 rank=0
    # ... for DP" before it under data parallelism (INFO in 0.11). A boot that hangs here hangs in NCCL's or the
    # network's hands (HAMi-core#261, vllm-ascend#1255).
    Rule(
        "world_size=",
        Begin("init", "init-distributed", None, unless_open=True),
        pattern=re.compile(
            r"^(?:Adjusting )?world_size=(?P<world>\d{1,6}) rank=(?P<rank>\d{1,6}) ", re.ASCII
        ),
    ),
    # initialize_model_parallel's last word once its groups exist ("rank 0 in world size 4 is assigned as DP rank 0,
    # PP rank 0, ...", 0.11 to 0.34): ends the step begun above. 0.11 logs no begin at INFO, so none is made up here.
    # From about 0.12 it is info_once, logged by each node's first rank alone; the groups are made collectively, so
    # the step ends on every worker there.
    Rule(
        "world size",
        End("init", "init-distributed", None, only_if_open=True, by_one_for_all=True),
        pattern=re.compile(
            r"^rank (?P<rank>\d{1,6}) in world size (?P<world>\d{1,6}) is assigned as", re.ASCII
        ),
    ),
    Rule("Loading drafter model", Begin("load", "load-weights", "draft"), weight=2),
    # The drafter's load_model, once its weights are in, shares the target's embedding or lm_head (0.33's
    # llm_base_proposer.py: "Detected MTP model. Sharing target model embedding weights with the draft model."):
    # the draft's load is under way on that rank, where `Loading drafter model...` (logged once) lies above a cut.
    # After the drafter's own `Loading weights took` it is a line of the same step (load_model returns at `Model loading
    # took`, whose seconds are the whole load_model's, target and drafter): it opens no second draft load there. Every
    # worker logs it, where only rank 0 logs the drafter's load (info_once, 0.23): it opens no draft load on a rank
    # once a rank's is in the log (batch 69's TP4; batch 53's answer counted only the ranks that logged the load).
    Rule(
        "Sharing target model",
        Begin(
            "load",
            "load-weights",
            "draft",
            unless_open=True,
            unless_going_on=True,
            unless_begun_anywhere=True,
        ),
        weight=2,
    ),
    # From 0.11.1 the V1 GPU runner logs its load, KV-memory and graph records with info_once: `Starting to load
    # model` by global rank 0 alone, the others by each node's first local rank (the scope's default, "process",
    # became "local" in 0.19); 0.11.0 and the V2 runner (0.12 on, the only one in 0.34) log some on every rank. The
    # engine's process logs the KV cache's size once for all. Marked one_rank_per_node: the other ranks' silence
    # is no sign that they missed the step.
    Rule("Starting to load model", Begin("load", "load-weights", "nth", one_rank_per_node=True), weight=2),
    # V1 0.10-0.11 prints it after "Starting to load model" (gpu_model_runner.load_model), the V2 model runner alone:
    # a second begin only where none is open.
    Rule(
        "Loading model from scratch",
        Begin("load", "load-weights", "nth", unless_open=True, one_rank_per_node=True),
        weight=2,
    ),
    # The model loader's load_model opens with "Loading weights on <device> ..." (base_loader.py, a debug record in
    # 0.11 and 0.34; Habana's vllm-fork logs it at INFO, "Loading weights on hpu ...", with its pre-0.8 record form
    # and nothing else of vLLM's before the loader's bar, vllm-fork#193). Weighed below an engine's own records:
    # SGLang before 0.4 loaded through vLLM's loader, whose logger writes in SGLang's processes.
    Rule("Loading weights on", Begin("load", "load-weights", "nth", unless_open=True), weight=1),
    # The loaders that fetch a checkpoint from the Hub (default, sharded-state, Run:ai, bitsandbytes) do it inside their
    # load_model and say how long it took ("Time spent downloading weights for rednote-hilab/dots.ocr: 170.155065
    # seconds", model_loader/weight_utils.py in 0.11 and 0.34): the load is under way where its begin lies above a cut
    # (a Ray worker's lines in vllm#28658). Weighed as "Loading weights on" is, for the same reason.
    Rule("Time spent downloading weights", Begin("load", "load-weights", "nth", unless_open=True), weight=1),
    # The TPU backend (tpu-inference) begins its model's load with "Loading model with MODEL_IMPL_TYPE=auto"
    # (models/common/model_loader.py get_model; vLLM's own `Starting to load model` is the GPU runner's).
    Rule("Loading model with MODEL_IMPL_TYPE", Begin("load", "load-weights", "nth", unless_open=True)),
    # The TPU backend (tpu-inference) names each shard as it loads it: the load is under way.
    Rule("Loading weights from", Begin("load", "load-weights", "nth", unless_open=True)),
    # V0's only load record; vllm-ascend's V1 runner prints it after `Loading weights took` too.
    Rule(
        "Loading model weights took", End("load", "load-weights", "nth", only_if_open_or_new=True), weight=2
    ),
    Rule(
        "Loading weights took",
        End("load", "load-weights", "nth", step_goes_on=True, one_rank_per_node=True),
        weight=2,
    ),
    Rule(
        "Model loading took",
        End("load", "load-weights", "nth", only_if_open_or_new=True, one_rank_per_node=True),
        weight=2,
    ),
    # V1's worker ends its memory profile with "Available KV cache memory: N GiB" (v1/worker/gpu_worker.py,
    # determine_available_memory, 0.8 to 0.34), then the engine sizes the cache from it: the phase is under way,
    # and began where the load ended, as the cache's size line would have said.
    Rule(
        "Available KV cache memory",
        Begin("kv", "kv-cache", "nth", from_last_end=True, unless_open=True, one_rank_per_node=True),
        weight=2,
    ),
    # The engine's process logs it once for all workers (v1/core/kv_cache_utils.py: "GPU KV cache size: N tokens",
    # 0.34 "<device> KV cache size: N tokens, ..."): it ends each worker's phase. Only with its number: 0.21's note
    # on CUDA graph memory profiling says "To maintain the same effective KV cache size as before" (vllm runner#251).
    Rule(
        "KV cache size",
        End("kv", "kv-cache", "nth", only_first=True, for_every_rank=True, one_rank_per_node=True),
        weight=2,
        pattern=re.compile(r"KV cache size: \d", re.ASCII),
    ),
    # V0 sizes the cache, logs "# GPU blocks: N", then allocates it, and raises "No available memory for the cache
    # blocks" at once when N is 0: zero blocks does not end the phase, it is the phase failing.
    Rule("GPU blocks: 0,", Begin("kv", "kv-cache", "nth", unless_open=True), weight=2),
    Rule("GPU blocks", End("kv", "kv-cache", "nth", only_first=True), weight=2),  # V0: "# GPU blocks: N"
    # V0 names the device in the same record on other platforms and releases: "# cuda blocks: N, # CPU blocks".
    Rule(
        "blocks: ",
        End("kv", "kv-cache", "nth", only_first=True),
        weight=2,
        pattern=re.compile(r"^# (?!CPU)\w{1,12} blocks: \d", re.ASCII),
    ),
    # Printed right after the KV cache is sized (V0 after `# GPU blocks`, V1 after `GPU KV cache size`, later in the
    # same record): an excerpt that starts below those lines still shows the KV cache sized.
    Rule(
        "Maximum concurrency for",
        End("kv", "kv-cache", "nth", only_first=True, one_rank_per_node=True),
        weight=2,
    ),
    Rule("Capturing the model for CUDA graphs", Begin("graph", "cuda-graph", "nth"), weight=2),  # V0 to 0.6.3
    # V0 from 0.6.4 (worker/model_runner.py capture_model): "Capturing cudagraphs for decoding. This may lead to ..."
    Rule("Capturing cudagraphs for decoding", Begin("graph", "cuda-graph", "nth"), weight=2),
    # The V2 model runner's capture_model captures the target's graphs, then the speculator's, then logs `Graph
    # capturing finished` for both (v1/worker/gpu/model_runner.py): the drafter's capture begins at its speculator's
    # line, "Capturing model for speculator..." (0.24), "Capturing model for DFlash speculator..." and "Capturing model
    # for multi-module MTP speculator..." (0.34's dflash/ and multi_module_mtp/), or "Capturing autoregressive
    # speculator..." (0.34's autoregressive/, EAGLE's).
    Rule(
        "Capturing model for",
        Begin("graph", "cuda-graph", "draft"),
        weight=2,
        pattern=re.compile(r"Capturing model for [\w -]{0,40}speculator\b", re.ASCII),
    ),
    Rule("Capturing autoregressive speculator", Begin("graph", "cuda-graph", "draft"), weight=2),
    # vllm-ascend's runner begins its graph step with "Starting to capture ACL graphs for cases: [...], mode: ..."
    # (worker/model_runner_v1.py; vllm-ascend#3389, #4594) and ends it with vLLM's `Graph capturing finished`.
    Rule("Starting to capture ACL graphs", Begin("graph", "cuda-graph", "nth", unless_open=True), weight=2),
    Rule("Graph capturing finished", End("graph", "cuda-graph", "nth", one_rank_per_node=True), weight=2),
    # The TPU runner's capture_model compiles the model for each input shape with XLA instead of capturing graphs
    # (v1/worker/tpu_model_runner.py: "Compiling the model with different input shapes."; vllm#15727): the same step.
    Rule(
        "Compiling the model with different input shapes",
        Begin("graph", "cuda-graph", "nth", unless_open=True),
        weight=2,
    ),
    # A capture logged size by size ("Graph capturing for 304 input tokens", a 0.10 PR's logging): each record
    # says the capture is under way, so the first opens the phase and the others leave it as it is.
    Rule("Graph capturing for", Begin("graph", "cuda-graph", "nth", unless_open=True), weight=2),
    Rule("Application startup complete", Ready(when_leading=True), weight=0),
    # The API server's own line before uvicorn's (entrypoints/openai/api_server.py, `Starting vLLM API server on` to
    # 0.10, `Starting vLLM API server 0 on` with API server counts, `Starting vLLM server on` from 0.11): its HTTP
    # server is coming up. Up only if nothing happens after it, or if it then serves (Boot.mark_served): its
    # `Application startup complete` went to stderr where only stdout was saved (batch 69).
    # Ray Serve's LLM deployment runs the engine in a replica and says when it serves ("[STATUS] Server is ready.",
    # then Serve's own "Application 'default' is ready at http://..."): vLLM logs no ready line there (batch 71).
    Rule("[STATUS] Server is ready", Ready(when_leading=True), weight=0),
    Rule(
        "Application '",
        Ready(when_leading=True),
        weight=0,
        pattern=re.compile(r"Application '[^']{1,200}' is ready at "),
    ),
    Rule("Starting vLLM API server", Ready(until_more=True), weight=0),
    Rule("Starting vLLM server on", Ready(until_more=True), weight=0),
    # The offline engine prints no ready line: its `Processed prompts` bar (entrypoints/llm.py; 0.34's
    # entrypoints/common/offline.py) is drawn only once it serves. Read here as a record when it is no frame the bar
    # reader takes (an unknown total's `0it [...]`, a long postfix); log_bars.py has it as a bar.
    Rule("Processed prompts", Ready(served=True)),
    # The engine's throughput, logged while it serves (V0's engine step; V1's stat logger at INFO only once there was
    # traffic, v1/metrics/loggers.py): an API server whose saved output holds no `Application startup complete`
    # (stdout alone, batch 43) still shows it served. No words of its own for the engine: SGLang logs none of it, but
    # an older SGLang imports vLLM's logger.
    Rule("Avg prompt throughput", Ready(served=True, requests=True), weight=0),
    # Ray Data's vLLM stage (ray/llm/_internal/batch/stages/vllm_engine_stage.py) logs each batch of prompts once the
    # engine has answered it: the offline engine serves, as its `Processed prompts` bar says elsewhere. Its
    # `Shutting down vLLM engine` follows the last batch, and the workers' errors as they tear down come after ready.
    Rule("[vLLM] Elapsed time for batch", Ready(served=True, requests=True), weight=0),
    Rule(
        "Filesystem type for checkpoints",
        Capture("filesystem", re.compile(r"Filesystem type for checkpoints: ([\w.-]+)")),
        weight=2,
    ),
    Rule(
        "Overall time to stream",
        Capture("throughput_GiBps", re.compile(r"\b(\d{1,6}(?:\.\d{1,6})?) ?([GM]i?B)/s", re.ASCII)),
        weight=0,
    ),
    Rule(
        "Loading safetensors using Fastsafetensor loader",
        Capture("loader", value="fastsafetensors"),
        weight=0,
    ),
    # Prefetching the checkpoint into the page cache (`--safetensors-load-strategy=prefetch`, or automatic on a
    # network file system when the checkpoint fits in RAM), 0.11 and later.
    Rule(
        "Prefetching checkpoint files into page cache started", Capture("prefetch", value="started"), weight=2
    ),
    Rule(
        "Prefetching checkpoint files into page cache finished",
        Capture("prefetch", re.compile(r"(finished in \d{1,9}(?:\.\d{1,6})? ?s)", re.ASCII)),
        weight=2,
    ),
    Rule(
        "Prefetching checkpoint files:",
        Capture(
            "prefetch", re.compile(r"Prefetching checkpoint files: (\d{1,3}% \(\d{1,9}/\d{1,9}\))", re.ASCII)
        ),
        weight=2,
    ),
    Rule(
        "Auto-prefetch is disabled",
        Capture("prefetch", re.compile(r"Auto-prefetch is (disabled because .*?)(?:\. If you want|\.?$)")),
        weight=2,
    ),
    # The durations vLLM states for its own steps, kept as stated (BootReport.startup_timings). torch.compile's time
    # (compilation/monitor.py, 0.7 on) is spent in the memory profile, after the load and before the KV cache is
    # sized: time the kv-cache phase holds when that phase began at the load's end. To 0.17 (in the corpus) the line
    # states the total so far ("takes N s in total": compilation_time); 0.20 on each compile is timed on its own
    # ("took N s in total", the target's and then a drafter's), and they add up. The engine core's init
    # (v1/engine/core.py, 0.8 on) spans the profile, the KV cache and the warm-up with its graphs; from 0.11 it adds
    # "(compilation: N s)", its own sum of Dynamo's and the backend's compile times, which is not the monitor's wall
    # time (59.75 s against 61.09 + 6.05 s in a 0.2x EAGLE-3 boot): kept as "compilation" beside it.
    Rule(
        "torch.compile t",
        Capture("startup_timings", _COMPILE_TOTAL_RE, step="torch_compile"),
        weight=0,
        pattern=_COMPILE_TOTAL_RE,
    ),
    Rule(
        "torch.compile t",
        Capture("startup_timings", _COMPILE_PART_RE, step="torch_compile", adds=True),
        weight=0,
        pattern=_COMPILE_PART_RE,
    ),
    Rule(
        "warmup model) took",
        Capture(
            "startup_timings",
            re.compile(
                r"warmup model\) took \**(\d{1,9}(?:\.\d{1,6})?) ?s(?:econds|ecs?)?\b\**"
                r"(?: \(compilation: (\d{1,9}(?:\.\d{1,6})?) ?s\))?",
                re.ASCII,
            ),
            step="init_engine",
            also="compilation",
        ),
        weight=0,
    ),
    Rule("EngineCore failed to start", Evidence(), weight=2),
    Rule("Engine core initialization failed", Evidence(), weight=2),
    # "Using Flash Attention backend on V1 engine." (the platforms' attention choice, 0.8-0.11): vLLM's words alone.
    Rule("on V1 engine", Evidence()),
    # SGLang's weight_utils prints it too: no evidence by its words, but the line is read, so its record form counts
    # (a paste of a vLLM load may hold nothing else but the bar).
    Rule("Using model weights format", Evidence(), weight=0),
)

END_MARKERS = {
    "load": "`Loading weights took`",
    "kv": "`GPU KV cache size`",
    "graph": "`Graph capturing finished`",
}

FRAMES: tuple[FrameRule, ...] = (
    FrameRule("init_worker_distributed_environment", "init-distributed", None, None),
    # The whole name: SGLang's model runner has `init_device_graphs` (its capture), read with this table where a log
    # has not said which engine wrote it.
    FrameRule("in init_device", "init-distributed", None, "device initialisation", whole_name=True),
    # The model registry importing a model's class (model_executor/models/registry.py): the API server does it to
    # inspect the architecture while it builds the model's configuration, before any engine or step exists
    # (vllm-ascend#2889, #3029: `inspect_model_cls` under `create_model_config`). A load that reaches it does so under
    # the loader's own frames (`model_loader/`), which name the load. Read before `in load_model`, whose name it
    # starts with.
    FrameRule("in load_model_cls", None, None, None),
    FrameRule("in load_model", "load-weights", None, None),
    FrameRule("in load_weights", "load-weights", None, None),
    FrameRule("model_loader/", "load-weights", None, None),
    # Building the model's layers allocates their weights: only the load builds them, so a traceback cut below
    # its load frame still names the phase.
    FrameRule("in create_weights", "load-weights", None, "model construction"),
    FrameRule("in determine_available_memory", "kv-cache", None, "memory profiling"),
    FrameRule("in determine_num_available_blocks", "kv-cache", None, "memory profiling"),
    FrameRule("in profile_run", "kv-cache", None, "memory profiling"),
    FrameRule("in _initialize_kv_caches", "kv-cache", None, None),
    FrameRule("in initialize_from_config", "kv-cache", None, None),
    FrameRule("in initialize_kv_cache", "kv-cache", None, None),
    # Sizing the cache against the memory left: V0's worker (raise_if_cache_size_invalid), V1's kv_cache_utils
    # (check_enough_kv_cache_memory, get_kv_cache_config*), moved to kv_cache_planning in 0.34.
    FrameRule("in raise_if_cache_size_invalid", "kv-cache", None, None),
    FrameRule("check_enough_kv_cache_memory", "kv-cache", None, None),
    FrameRule("in get_kv_cache_config", "kv-cache", None, None),
    FrameRule("kv_cache_planning.py", "kv-cache", None, None),
    FrameRule("in capture_model", "cuda-graph", None, None),
    # compile_or_warm_up_model warms the kernels up before it captures (model_executor/warmup/kernel_warmup.py, 0.11 to
    # 0.34): innermost, the warm-up says which part of that step failed.
    FrameRule("in kernel_warmup", "cuda-graph", None, "kernel warm-up"),
    FrameRule("in compile_or_warm_up_model", "cuda-graph", None, "compilation and CUDA graph capture"),
    # torch.cuda.graph's own frames: a CUDA graph is being captured, whatever the engine's frames above were cut
    # to (vLLM's piecewise capture runs under its compilation backend's __call__, not under capture_model).
    FrameRule("in capture_begin", "cuda-graph", None, None),
    FrameRule("in capture_end", "cuda-graph", None, None),
    FrameRule("spec_decode/", None, "draft", "drafter"),
    FrameRule("in load_drafter", None, "draft", "drafter load"),
    FrameRule("drafter", None, "draft", "drafter"),
    # Any other frame of vLLM's or of a platform plugin's: says only that vLLM was running.
    FrameRule("/vllm/", None, None, None),
    FrameRule("/vllm_ascend/", None, None, None),
)

MODULE_PATHS = ("/vllm/", "/vllm_ascend/")

LOG = EngineLog(
    name="vllm",
    title="vLLM",
    records=RECORDS,
    end_markers=END_MARKERS,
    frames=FRAMES,
    size_keys={
        "tp": ("tensor_parallel_size", "tp_size"),
        "pp": ("pipeline_parallel_size", "pp_size"),
        "dp": ("data_parallel_size", "dp_size"),
    },
    module_paths=MODULE_PATHS,
    draft_framed_steps=("load-weights",),
    # ("ApiServer_N": the API server processes of --api-server-count, named so by vllm/v1/utils.py.)
    process_tag=re.compile(
        rb"\((?:VllmWorker|VllmWorkerProcess|Worker_[A-Z]|EngineCore|RayWorkerWrapper|RayWorkerProc|APIServer"
        rb"|ApiServer_\d)"
        rb"[^()\n]{0,60} pid=\d{1,10}"
    ),
    # Its logger's form since 0.8 (vllm/logger.py, 0.11 to 0.34: the level, a year-less time, then "[file.py:line]"
    # in brackets); SGLang's processes wrote vLLM's older form, without the bracket, when they imported its modules.
    # Behind blanks and colour codes too: a coloured paste is read as the plain one (the metamorphic tests). The older
    # form alone was tried as evidence too (HabanaAI/vllm-fork#193, batch 10) and left out: these tags are counted
    # over a whole block, and an untimed excerpt followed by a vLLM 0.4 server's log then read as vLLM's.
    record_prefix=re.compile(
        rb"\n[ \t]*(?:\x1b\[[0-9;]*m)*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? "
        rb"\[[\w./-]{1,120}\.py:\d{1,6}\] "
    ),
)
