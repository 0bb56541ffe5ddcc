"""The lines current releases write, built from their own format strings (read in the released wheels:
sglang 0.5.23 `distributed/bootstrap.py`, `model_executor/model_runner.py`, `model_runner_components/cuda_graph_setup.py`,
`speculative/eagle_worker_v2.py`, `model_loader/weight_utils.py`; vllm 0.33.0 `model_loader/weight_utils.py`,
`v1/worker/gpu_model_runner.py`). The real-log corpus holds no boot of these exact releases yet.

SGLang 0.5.21 on logs its process groups' start as `Init parallel begin.` / `Init parallel ends. elapsed=...`
(bootstrap.py's init_parallel_runtime); 0.5.20 and before, `Init torch distributed begin.` / `... ends.` from
model_runner.py (checked in the 0.5.20, 0.5.21, 0.5.22 and 0.5.23 wheels)."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes


def _sglang(lines: list[tuple[str | None, str]]) -> bytes:
    """Records stamped one second apart; a tag of None is a line written as is (a tqdm frame)."""
    return "".join(
        f"{text}\n" if tag is None else f"[2026-11-30 10:{index // 60:02d}:{index % 60:02d}{tag}] {text}\n"
        for index, (tag, text) in enumerate(lines)
    ).encode()


def _both(text: str) -> list[tuple[str | None, str]]:
    return [(" TP0", text), (" TP1", text)]


SGLANG_0_5_23_EAGLE3_TP2 = [
    (
        "",
        "server_args=ServerArgs(model_path='/m', tp_size=2, speculative_algorithm='EAGLE3', attn_tp_size=1)",
    ),
    *_both("Init parallel begin."),
    *_both("Init parallel ends. elapsed=0.41 s"),
    *_both("Memory baseline taken. mem usage=0.09 GB"),
    *_both("Load weight begin. avail mem=78.10 GB"),
    *_both(
        "Load weight end. elapsed=20.02 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.0 GB, "
        "mem usage=18.1 GB."
    ),
    *_both("Load weight begin. avail mem=60.00 GB"),
    *_both(
        "Load weight end. elapsed=1.20 s, type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=59.0 GB, "
        "mem usage=1.0 GB."
    ),
    *_both("KV Cache is allocated. #tokens: 400000, K size: 20.00 GB, V size: 20.00 GB"),
    *_both("Memory pool end. avail mem=19.00 GB"),
    *_both("KV Cache is allocated. #tokens: 400000, K size: 0.50 GB, V size: 0.50 GB"),
    *_both("Memory pool end. avail mem=18.00 GB"),
    *_both("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=18.00 GB"),
    *_both(
        "Capture target verify CUDA graph end. bs=[1, 2, 4, 8], elapsed=2.60 s, mem usage=1.00 GB, "
        "avail mem=17.00 GB."
    ),
    *_both("Capture draft decode CUDA graph begin. backend=full, bs=[1, 2, 4, 8], avail mem=17.00 GB"),
    *_both("Capture draft decode CUDA graph end. elapsed=3.00 s, mem usage=0.20 GB, avail mem=16.80 GB."),
    *_both("Capture draft extend CUDA graph begin. backend=full, bs=[1, 2, 4, 8], avail mem=16.80 GB"),
]


def test_sglang_0_5_eagle3_boot_is_read_phase_by_phase() -> None:
    report = analyze_bytes(_sglang(SGLANG_0_5_23_EAGLE3_TP2))
    assert (report.framework, report.state) == ("sglang", "cuda-graph")
    assert [(phase.name, phase.model, phase.variant, phase.ranks) for phase in report.phases] == [
        ("init-distributed", None, None, 2),
        ("load-weights", "target", None, 2),
        ("load-weights", "draft", None, 2),
        ("kv-cache", "target", None, 2),
        ("kv-cache", "draft", None, 2),
        ("cuda-graph", "target", "verify", 2),
        ("cuda-graph", "draft", "decode", 2),
        ("cuda-graph", "draft", "extend", 2),
    ]
    assert report.phases[5].seconds == 2.6  # the logged elapsed, which the whole-second stamps agree with
    assert (report.phases[0].seconds, report.phases[0].stated) == (
        0.41,
        True,
    )  # `Init parallel ends. elapsed=`
    assert report.summary.startswith(
        "capturing draft extend CUDA graphs: `Capture draft extend cuda graph end`"
    )


def test_sglang_0_5_without_speculation_captures_target_decode_graphs_on_any_device() -> None:
    for device_graph in ("CUDA graph", "NPU graph"):
        lines = [
            ("", "server_args=ServerArgs(model_path='/m', tp_size=1, speculative_algorithm=None)"),
            ("", "Load weight begin. avail mem=78.10 GB"),
            (None, "Multi-thread loading shards: 100% Completed | 4/4 [00:04<00:00,  1.00it/s]"),
            (
                "",
                "Load weight end. elapsed=4.10 s, type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60 GB",
            ),
            (
                "",
                f"Capture target decode {device_graph} begin. backend=full, num_tokens_per_req=1, avail mem=9 GB",
            ),
            (
                "",
                f"Capture target decode {device_graph} end. bs=[1, 2], elapsed=5.00 s, mem usage=1 GB, avail mem=8 GB.",
            ),
            ("", "The server is fired up and ready to roll!"),
        ]
        report = analyze_bytes(_sglang(lines))
        assert report.state == "ready", device_graph
        assert [(phase.name, phase.model, phase.variant) for phase in report.phases] == [
            ("load-weights", "target", None),
            ("cuda-graph", "target", "decode"),
            ("ready", None, None),
        ]
        assert report.loader == "multithread"


VLLM_0_33_PREFETCH = """\
(EngineCore pid=77) INFO 11-30 10:00:00 [core.py:98] Initializing a V1 LLM engine (v0.33.0) with config: model='/nfs/m', speculative_config=None, tensor_parallel_size=1
(EngineCore pid=77) INFO 11-30 10:00:05 [gpu_model_runner.py:4979] Starting to load model /nfs/m...
(EngineCore pid=77) INFO 11-30 10:00:06 [weight_utils.py:1144] Filesystem type for checkpoints: nfs4. Checkpoint size: 140.00 GiB. Available RAM: 1500.00 GiB.
(EngineCore pid=77) INFO 11-30 10:00:06 [weight_utils.py:1106] Prefetching checkpoint files into page cache started (in background, num_threads=16, block_size=16777216 bytes)
(EngineCore pid=77) INFO 11-30 10:00:26 [weight_utils.py:1078] Prefetching checkpoint files: 40% (12/30)
Loading safetensors checkpoint shards (eager):  40% Completed | 12/30 [00:20<00:30,  1.67s/it]
"""


def test_vllm_prefetch_and_file_system_are_reported_while_the_load_runs() -> None:
    report = analyze_bytes(VLLM_0_33_PREFETCH.encode())
    assert (report.framework, report.state) == ("vllm", "load-weights")
    assert (report.filesystem, report.prefetch, report.loader) == ("nfs4", "40% (12/30)", "default")
    assert report.progress[-1].desc == "Loading safetensors checkpoint shards"
    finished = VLLM_0_33_PREFETCH + (
        "(EngineCore pid=77) INFO 11-30 10:00:58 [weight_utils.py:1101] Prefetching checkpoint files into page "
        "cache finished in 52.31s\n"
    )
    assert analyze_bytes(finished.encode()).prefetch == "finished in 52.31s"
    disabled = VLLM_0_33_PREFETCH.replace(
        "Prefetching checkpoint files into page cache started (in background, num_threads=16, block_size=16777216 "
        "bytes)",
        "Auto-prefetch is disabled because the filesystem (ext4) is not a recognized network FS (NFS/Lustre). If "
        "you want to force prefetching, start vLLM with --safetensors-load-strategy=prefetch.",
    ).replace(
        "(EngineCore pid=77) INFO 11-30 10:00:26 [weight_utils.py:1078] Prefetching checkpoint files: 40% (12/30)\n",
        "",
    )
    assert analyze_bytes(disabled.encode()).prefetch == (
        "disabled because the filesystem (ext4) is not a recognized network FS (NFS/Lustre)"
    )


def test_a_load_weights_took_line_inside_an_sglang_log_keeps_it_sglang() -> None:
    """SGLang's records are read by SGLang's table only: a vLLM-sounding message there is not vLLM's."""
    lines = [
        (" TP0", "Load weight begin. avail mem=78.10 GB"),
        (" TP0", "Loading weights took 3.20 seconds"),
        (" TP0", "Model loading took 12.0 GiB and 3.5 seconds"),
    ]
    report = analyze_bytes(_sglang(lines))
    assert (report.framework, report.state) == ("sglang", "load-weights")
    assert [(phase.name, phase.model, phase.end) for phase in report.phases] == [
        ("load-weights", "target", None)
    ]


def test_a_second_pipeline_stage_is_not_a_draft() -> None:
    """Each PP stage loads its own layers: PP1's `Load weight begin` is the target's, like PP0's."""
    lines = [
        ("", "server_args=ServerArgs(model_path='/m', tp_size=2, pp_size=2, speculative_algorithm=None)"),
        *[(f" PP{pp} TP{tp}", "Load weight begin. avail mem=70.00 GB") for pp in (0, 1) for tp in (0, 1)],
        *[
            (f" PP{pp} TP{tp}", "Load weight end. type=LlamaForCausalLM, avail mem=30 GB")
            for pp in (0, 1)
            for tp in (0, 1)
        ],
    ]
    report = analyze_bytes(_sglang(lines))
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [
        ("load-weights", "target", 4)
    ]
    assert report.warnings == ()


def test_bars_alone_give_the_state() -> None:
    """A CI log or a worker's own output: bars under a worker prefix and no dated record at all."""
    log = (
        "(Worker_TP0 pid=9) Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:03<00:09,  3.00s/it]\n"
        "(Worker_TP0 pid=9) Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:06<00:06,  3.00s/it]\n"
    )
    report = analyze_bytes(log.encode())
    assert report.state == "load-weights"
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [
        ("load-weights", "target", 1)
    ]
    assert (report.progress[-1].done, report.progress[-1].total) == (2, 4)


def test_each_ranks_kv_phase_starts_at_its_own_load_end() -> None:
    lines = [
        (" TP0", "Load weight begin. avail mem=78 GB"),
        (" TP1", "Load weight begin. avail mem=78 GB"),
        (" TP0", "Load weight end. type=LlamaForCausalLM, avail mem=30 GB"),
        *[("", "waiting") for _ in range(9)],
        (" TP1", "Load weight end. type=LlamaForCausalLM, avail mem=30 GB"),
        (" TP0", "KV Cache is allocated. #tokens: 1000, K size: 1 GB, V size: 1 GB"),
        (" TP1", "KV Cache is allocated. #tokens: 1000, K size: 1 GB, V size: 1 GB"),
        (" TP0", "Memory pool end. avail mem=10 GB"),
        (" TP1", "Memory pool end. avail mem=10 GB"),
    ]
    report = analyze_bytes(_sglang(lines))
    kv = report.phases[-1]
    # TP0 ended its load at 10:00:02 and its pool at 10:00:15 (13 s, the slowest); TP1 ended its load at 10:00:12
    # and its pool at 10:00:16 (4 s, not 14: its phase starts at its own load end). The phase spans 02 to 16.
    assert (kv.name, kv.start, kv.seconds, kv.slowest_rank) == (
        "kv-cache",
        "2026-11-30 10:00:02",
        14.0,
        "TP0",
    )


def test_older_and_platform_records_open_their_phases() -> None:
    # SGLang 0.3 named torch.distributed's init "Init nccl begin"; vLLM on TPU logs each shard it loads
    sglang_0_3 = b"[22:30:32 TP0] Init nccl begin.\n[22:30:32 TP0] Load weight begin. avail mem=191.33 GB\n"
    assert [phase.name for phase in analyze_bytes(sglang_0_3).phases] == ["init-distributed", "load-weights"]
    tpu = (
        b"(EngineCore_DP0 pid=7110) INFO 01-15 15:45:29 [weight_utils.py:162] Loading weights from "
        b"/hub/model-00001-of-00004.safetensors\n"
        b"(EngineCore_DP0 pid=7110) INFO 01-15 15:45:30 [weight_utils.py:162] Loading weights from "
        b"/hub/model-00002-of-00004.safetensors\n"
    )
    report = analyze_bytes(tpu)
    assert (report.framework, report.state) == ("vllm", "load-weights")
    assert [(phase.name, phase.ranks) for phase in report.phases] == [("load-weights", 1)]


def test_sglang_0_5_21_on_hung_in_its_process_groups_names_the_line_it_awaits() -> None:
    # GIVEN a 0.5.21+ boot whose TP1 never finished building its process groups (NCCL hung after
    # `Init parallel begin.`: the hang users report on two ranks whose peer-to-peer path is broken)
    report = analyze_bytes(
        _sglang(
            [
                ("", "server_args=ServerArgs(model_path='/m', tp_size=2)"),
                *_both("Init parallel begin."),
                (" TP0", "Init parallel ends. elapsed=0.88 s"),
            ]
        )
    )
    # THEN the boot is in init-distributed, waiting for the end line this release writes, not an older one's
    assert report.state == "init-distributed"
    assert "`Init parallel ends` not yet logged on 1 of 2 ranks" in report.summary, report.summary


# sglang 0.5.23 `--startup-weight-load-mode=overlap` (model_runner_components/startup_weight_load.py, managers/
# scheduler.py's init_model_worker; TP1 and TP2 without speculative decoding): a capture-safe model is built, the
# checkpoint is read in the background while the KV pool is built and the CUDA graphs are captured, and the load ends
# at `Load weight end. Committed real weights after CUDA graph capture` (the usual `Load weight end. elapsed=` is not
# logged). Stamped by the second.
SGLANG_0_5_23_OVERLAP = [
    (0, "server_args=ServerArgs(model_path='/m', tp_size=1, startup_weight_load_mode='overlap')"),
    (0, "Init parallel begin."),
    (1, "Init parallel ends. elapsed=0.40 s"),
    (2, "Load weight begin. avail mem=78.10 GB"),
    (3, "Prepared capture-safe model in 1.20 s"),
    (3, "Started checkpoint prefetching 0.01 s after capture-safe model prep"),
    (4, "KV Cache is allocated. #tokens: 400000, K size: 20.00 GB, V size: 20.00 GB"),
    (5, "Memory pool end. avail mem=19.00 GB"),
    (
        6,
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8], avail mem=18.00 GB",
    ),
    (26, "Capture target decode CUDA graph end. elapsed=20.00 s, mem usage=1.00 GB, avail mem=17.00 GB."),
    (
        56,
        "Load weight end. Committed real weights after CUDA graph capture in 30.00 s (capture overlap window "
        "25.00 s, startup overlap total 56.00 s)",
    ),
    (58, "The server is fired up and ready to roll!"),
]


def _overlap_log(lines: int) -> bytes:
    return "".join(
        f"[2026-11-30 10:00:{second:02d}] {text}\n" for second, text in SGLANG_0_5_23_OVERLAP[:lines]
    ).encode()


def test_sglang_weights_read_while_graphs_are_captured_are_one_load_of_the_target() -> None:
    report = analyze_bytes(_overlap_log(len(SGLANG_0_5_23_OVERLAP)))
    assert report.state == "ready"
    # THEN the load runs from its begin to the commit, beside the KV pool and the graphs: no draft load is invented
    # for the second `Load weight end`, and the KV step begins when the load went into the background
    assert [(phase.name, phase.model, phase.start[-2:], phase.end[-2:]) for phase in report.phases] == [
        ("init-distributed", None, "00", "01"),
        ("load-weights", "target", "02", "56"),
        ("kv-cache", "target", "03", "05"),
        ("cuda-graph", "target", "06", "26"),
        ("ready", None, "56", "58"),
    ]
    assert report.warnings == ()


def test_graphs_captured_while_the_weights_still_load_are_not_a_loaded_server() -> None:
    # GIVEN the same boot cut right after its graphs were captured, and again during the capture
    after_capture = analyze_bytes(_overlap_log(10))
    during_capture = analyze_bytes(_overlap_log(9))
    # THEN the boot waits for its weights (the guess "weights loaded, it must be building CUDA graphs" is the wrong one)
    assert after_capture.state == "load-weights"
    assert (
        after_capture.summary
        == "loading target weights in the background: `Load weight end` not yet logged [model /m]"
    )
    assert after_capture.warnings == ()  # still running: nothing was skipped
    assert during_capture.state == "cuda-graph"
    assert during_capture.summary.endswith(
        "; loading target weights in the background: `Load weight end` not yet logged [model /m]"
    ), during_capture.summary


# vLLM 0.30's V2 model runner (batch 32's vllm-entail-research-rope-override-two-graph-captures, cut down): the graphs
# are captured once to profile their memory, the KV cache is sized, and they are captured again for serving.
VLLM_0_30_CAPTURES_AROUND_KV = b"""INFO 09-23 11:00:26 [core.py:123] Initializing a V1 LLM engine (v0.30.0) with config: model='/m', speculative_config=None, tensor_parallel_size=1
INFO 09-23 11:00:27 [model_runner.py:396] Loading model from scratch...
INFO 09-23 11:00:30 [model_runner.py:428] Model loading took 7.56 GiB memory and 2.805453 seconds
Capturing CUDA graphs (PIECEWISE): 100%|##########| 11/11 [00:00<00:00, 16.73it/s]
INFO 09-23 11:00:55 [model_runner.py:1066] Graph capturing finished in 1 secs, took 0.11 GiB
INFO 09-23 11:00:55 [gpu_worker.py:640] Available KV cache memory: 1.67 GiB
INFO 09-23 11:00:55 [kv_cache_utils.py:2395] GPU KV cache size: 12,176 tokens, Maximum concurrency for 3,072 tokens per request: 3.96x
Capturing CUDA graphs (PIECEWISE): 100%|##########| 11/11 [00:00<00:00, 17.20it/s]
INFO 09-23 11:00:59 [model_runner.py:1066] Graph capturing finished in 2 secs, took 0.09 GiB
"""


def test_graphs_captured_again_after_the_kv_cache_are_the_boots_newest_step() -> None:
    report = analyze_bytes(VLLM_0_30_CAPTURES_AROUND_KV)
    assert report.state == "cuda-graph"
    assert report.summary.startswith("target CUDA graphs captured on 1 of 1 ranks"), report.summary
    # AND a crash after it happened after the second capture, not after the KV cache
    crashed = analyze_bytes(
        VLLM_0_30_CAPTURES_AROUND_KV
        + b"""ERROR 09-23 11:01:00 [core.py:1366] EngineCore failed to start.
ERROR 09-23 11:01:00 [core.py:1366] Traceback (most recent call last):
ERROR 09-23 11:01:00 [core.py:1366]   File "/x/harness.py", line 12, in run
ERROR 09-23 11:01:00 [core.py:1366]     check()
ERROR 09-23 11:01:00 [core.py:1366] RuntimeError: injected
"""
    )
    assert crashed.summary.startswith("failed after target CUDA graphs captured"), crashed.summary


def test_a_graph_capture_named_after_another_device_is_the_same_step() -> None:
    # sglang 0.5.9's model_runner.py names the capture after the device's graph kind (graph_backend: "npu graph",
    # "cpu graph", else "cuda graph")
    for device in ("npu", "cpu"):
        lines = [
            *_both("Load weight begin. avail mem=30.00 GB"),
            *_both(
                "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=20.00 GB, mem usage=10.00 GB."
            ),
            *_both(f"Capture {device} graph begin. This can take up to several minutes. avail mem=11.91 GB"),
            (
                " TP0",
                f"Capture {device} graph end. Time elapsed: 26.63 s. mem usage=1.98 GB. avail mem=9.93 GB.",
            ),
        ]
        report = analyze_bytes(_sglang(lines))
        graph = report.phases[-1]
        assert (graph.name, graph.model, graph.ranks) == ("cuda-graph", "target", 2), report.phases
        assert report.summary.endswith(f"`Capture {device} graph end` not yet logged on 1 of 2 ranks"), (
            report.summary
        )
