"""What blind batch 9 of issue #33 taught the reader (reports/cpu/2026-12-04d-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import BootReport, analyze_bytes

BARS = b"".join(
    b"Multi-thread loading shards:  %d%% Completed | %d/62 [01:%02d<08:39,  9.27s/it]\n"
    % (n * 100 // 62, n, n)
    for n in range(6, 10)
)
SGLANG_NEXT = b"""/venv/lib/python3.12/site-packages/sglang/launch_server.py:56: UserWarning: use `sglang serve`
[2026-08-01 23:37:39] server_args=ServerArgs(model_path='m', tp_size=1)
[2026-08-01 23:37:45] Load weight begin. avail mem=78.81 GB
"""
VLLM_NEXT = b"""INFO 05-04 14:43:16 api_server.py:151] vLLM API server version 0.4.1
INFO 05-04 14:43:16 api_server.py:152] args: Namespace(host=None, port=8000)
INFO 05-04 14:43:30 model_runner.py:173] Loading model weights took 14.9595 GB
"""


def _boots(data: bytes) -> list[BootReport]:
    last = analyze_bytes(data)
    return [analyze_bytes(data, boot=n) for n in range(1, last.boots)] + [last]


def test_kvcached_allocator_line_is_the_kv_cache_phase() -> None:
    # GIVEN SGLang with the kvcached plugin: its allocator's line in place of SGLang's pool line, then a crash
    # (ovg-project/kvcached#198)
    log = b"""[2025-10-12 21:14:09] Load weight end. type=GptOssForCausalLM, dtype=torch.bfloat16, avail mem=163.13 GB
[kvcached][INFO][2025-10-12 21:14:09][page_allocator.py:152] Init kvcached KV cache allocator: num_layers=24
[2025-10-12 21:14:09] Scheduler hit an exception: Traceback (most recent call last):
"""
    report = analyze_bytes(log)
    # THEN the boot failed while its KV cache was being set up
    assert [(phase.name, phase.model) for phase in report.phases] == [
        ("load-weights", "target"),
        ("kv-cache", "target"),
    ]
    assert report.failure is not None and (report.failure.phase, report.failure.model) == (
        "kv-cache",
        "target",
    )


def test_untimed_bars_take_no_time_from_the_next_server() -> None:
    # GIVEN a paste of loader bars with no stamps, then another server's log whose first stamp is on its start line
    # (the concatenation test on sglang#15608 and sglang#18124). Where the next server's launcher stamps lines before
    # its start (vllm#10661, gpustack#3098 before sglang-dgx-spark-local-llm-dflash-int4), those lines are still read
    # as the bars' boot's: CONCAT_WRONG in test_bootlog_metamorphic_cut.py.
    for following in (VLLM_NEXT, SGLANG_NEXT):
        alone = analyze_bytes(BARS)
        boots = _boots(BARS + following)
        # THEN the bars' boot is one of two, and its phase has no time, as alone
        assert len(boots) == 2, following
        assert [(p.name, p.start, p.seconds) for p in boots[0].phases] == [
            (p.name, p.start, p.seconds) for p in alone.phases
        ]
        assert boots[0].phases[0].start is None
        assert boots[0].first_timestamp is None


def test_a_log_that_opens_untimed_keeps_its_own_first_stamp() -> None:
    # GIVEN a log whose first lines are untimed bars of its own load, then its own stamped records (no server start)
    log = BARS + b"[2026-08-01 23:37:45 TP0] Load weight end. type=LlamaForCausalLM, avail mem=60.1 GB\n"
    report = analyze_bytes(log)
    # THEN the bars are stamped with the log's first stamp, as before
    assert report.phases[0].start == "2026-08-01 23:37:45"


def test_ray_data_actor_tags_with_parentheses_are_read() -> None:
    # GIVEN Ray Data's actor tag, whose name holds parentheses, before vLLM's worker tag (ray-project/ray#56905)
    tag = b"(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=162837) (Worker pid=186718) "
    log = (
        tag + b"INFO 09-23 17:01:42 [gpu_model_runner.py:2338] Starting to load model /models/qwen3-32b...\n"
        b"" + tag + b"ERROR 09-23 17:01:43 [multiproc_executor.py:585] WorkerProc failed to start.\n"
    )
    report = analyze_bytes(log)
    # THEN the records' times are read, and the worker that failed is named by its process id
    assert report.first_timestamp is not None and report.first_timestamp.endswith("09-23 17:01:42")
    assert report.failure is not None and report.failure.rank == "pid186718"


def test_a_log_that_names_no_engine_says_so_and_what_would_end_the_phase() -> None:
    # GIVEN loader bars alone, which SGLang and vLLM both draw (sglang#18124, vllm#10661)
    report = analyze_bytes(BARS)
    # THEN the engine is unknown, the summary names each engine's end line, and a warning says what was looked for
    assert report.framework == "unknown"
    assert "`Load weight end` (SGLang) or `Loading weights took` (vLLM) not yet logged" in report.summary
    assert any("does not say which engine wrote it" in warning for warning in report.warnings)
    # AND a log that names its engine gets neither
    named = analyze_bytes(b"[2026-08-01 23:37:40 TP0] Load weight begin. avail mem=78.81 GB\n" + BARS)
    assert named.framework == "sglang"
    assert "(SGLang) or" not in named.summary
    assert not any("does not say which engine" in warning for warning in named.warnings)
