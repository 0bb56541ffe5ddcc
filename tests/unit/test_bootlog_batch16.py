"""What blind batch 16 of issue #33 taught the reader (reports/cpu/2026-12-05c-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

ENGINE = b"(EngineCore pid=274) "
CONFIG = b"model='/m', speculative_config=None, tokenizer='/m', tensor_parallel_size=2"


def _ready_boot() -> bytes:
    return (
        ENGINE + b"INFO 06-13 20:05:36 [core.py:112] Initializing a V1 LLM engine (v0.22.1) with config: " + CONFIG
        + b"\n(Worker_TP0 pid=300) INFO 06-13 20:05:55 [model_runner.py:274] Loading model from scratch...\n"
        + b"(Worker_TP0 pid=300) INFO 06-13 20:06:36 [default_loader.py:397] Loading weights took 40.51 seconds\n"
        + ENGINE + b"INFO 06-13 20:07:02 [kv_cache_utils.py:1733] GPU KV cache size: 63,584 tokens\n"
        + b"(APIServer pid=228) INFO:     Application startup complete.\n"
    )  # fmt: skip


def test_a_failed_steps_input_dump_is_no_new_server() -> None:
    # GIVEN a server up, then a request that kills the engine, which dumps the failed step's input with its
    # configuration (vLLM 0.22.1's dump_input.py; a Kaggle TP2 LoRA boot)
    log = _ready_boot() + (
        ENGINE + b"ERROR 06-13 20:09:13 [dump_input.py:72] Dumping input data for V1 LLM engine (v0.22.1) with "
        b"config: " + CONFIG + b"\n"
        + ENGINE + b"ERROR 06-13 20:09:13 [core.py:1167] EngineCore encountered a fatal error.\n"
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the log holds one boot, which was ready, its load read
    assert (report.boots, report.state) == (1, "ready")
    assert ("load-weights", "target") in [(phase.name, phase.model) for phase in report.phases]
    # AND a second server's configuration still starts a second boot
    again = (
        log
        + ENGINE
        + b"INFO 06-13 21:00:00 [core.py:112] Initializing a V1 LLM engine (v0.22.1) with config: "
    )
    assert analyze_bytes(again + CONFIG + b"\n").boots == 2


def test_sglangs_piecewise_graphs_are_a_graph_step() -> None:
    # GIVEN SGLang 0.5.9's piecewise capture after the decode graphs (init_piecewise_cuda_graphs; sglang#20758)
    log = (
        b"[2026-03-17 07:16:10 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=40 GB\n"
        b"[2026-03-17 07:16:38 TP0] Capture cuda graph end. Time elapsed: 27.41 s. mem usage=1.0 GB.\n"
        b"[2026-03-17 07:16:38 TP0] Capture piecewise CUDA graph begin. avail mem=10.81 GB\n"
        b"[2026-03-17 07:16:51 TP0] Capture piecewise CUDA graph end. Time elapsed: 13.00 s. mem usage=0.5 GB.\n"
    )
    report = analyze_bytes(log)
    # THEN the piecewise graphs are the target's graph step too, as a variant, timed from its own records
    graphs = [(phase.model, phase.variant, phase.start, phase.end) for phase in report.phases]
    assert graphs == [
        ("target", None, "2026-03-17 07:16:10", "2026-03-17 07:16:38"),
        ("target", "piecewise", "2026-03-17 07:16:38", "2026-03-17 07:16:51"),
    ]
    # AND a crash on a rank behind one that began them is in the graph step
    tail = (
        b"[2026-06-11 05:11:58 TP1] Memory pool end. avail mem=0.49 GB\n"
        b"[2026-06-11 05:11:58 TP1] Capture piecewise CUDA graph begin. avail mem=0.08 GB\n"
        b"[2026-06-11 05:11:58 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 384.00 MiB.\n"
    )
    failure = analyze_bytes(tail).failure
    assert failure is not None and (failure.rank, failure.phase, failure.model) == (
        "TP0",
        "cuda-graph",
        "target",
    )
