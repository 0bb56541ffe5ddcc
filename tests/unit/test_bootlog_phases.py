"""Boot phases, progress, failures and the state sentence, on fixture logs written from the documented formats."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest

from ckptprof.bootlog import BootReport, analyze_bytes, analyze_path
from ckptprof.bootlog.parse import LineSplitter
from ckptprof.bootlog.phases import STALL_AFTER_S, BootLogAnalyzer

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SEED_SUMMARY = (
    "loading draft weights: 40/64 shards read, `Load weight end` not yet logged on 8 of 8 ranks "
    "- CUDA graph capture has not started [model /data/kimi-k2-instruct]"
)


def analyze(name: str, stall_after_s: float = STALL_AFTER_S) -> BootReport:
    return analyze_path(str(LOGS / name), stall_after_s)


def phase_keys(report: BootReport) -> list[tuple[str, str | None, str | None]]:
    return [(phase.name, phase.model, phase.variant) for phase in report.phases]


def test_seed_scenario_cut_while_draft_shards_load_is_loading_the_draft() -> None:
    """GIVEN a TP8 EAGLE-3 log cut at 40/64 draft shards, the bar sharing lines with TP-rank records
    WHEN it is analysed THEN the server is loading the draft, not capturing CUDA graphs."""
    report = analyze("sglang_tp8_eagle3_cut_loading_draft.log")
    assert report.framework == "sglang"
    assert report.state == "load-weights"
    assert not report.ready
    current = report.phases[-1]
    assert (current.name, current.model, current.end, current.ranks) == ("load-weights", "draft", None, 8)
    assert phase_keys(report)[:2] == [("init-distributed", None, None), ("load-weights", "target", None)]
    assert all(phase.name != "cuda-graph" for phase in report.phases)
    draft_bar = report.progress[-1]
    assert (draft_bar.model, draft_bar.done, draft_bar.total, draft_bar.eta_s) == ("draft", 40, 64, 14)
    assert draft_bar.rate == pytest.approx(1.64)
    assert report.summary == SEED_SUMMARY
    assert report.warnings == ()


def test_2025_order_cut_while_draft_loads_after_target_graphs() -> None:
    """GIVEN the 2025 order, where target CUDA graphs precede the draft's weights, cut at 40/64 draft shards
    THEN the state is still the draft's load-weights, though a cuda-graph phase appears earlier."""
    report = analyze("sglang_tp8_eagle3_2025_cut_loading_draft.log")
    assert report.state == "load-weights"
    assert phase_keys(report)[-2:] == [("cuda-graph", "target", None), ("load-weights", "draft", None)]
    assert report.summary.startswith("loading draft weights: 40/64 shards read")
    assert report.summary.endswith(
        "target CUDA graphs are captured; draft CUDA graph capture has not started [model /data/kimi-k2-instruct]"
    )


def test_newer_boot_order_with_eagle3_attributes_every_phase() -> None:
    report = analyze("sglang_tp8_eagle3_newer_ready.log")
    assert report.state == "ready" and report.ready
    assert phase_keys(report) == [
        ("init-distributed", None, None),
        ("load-weights", "target", None),
        ("load-weights", "draft", None),
        ("kv-cache", "target", None),
        ("kv-cache", "draft", None),
        ("cuda-graph", "target", None),
        ("cuda-graph", "draft", None),
        ("ready", None, None),
    ]
    assert [bar.model for bar in report.progress] == ["target", "draft", "target", "draft"]
    assert report.warnings == ()
    assert report.summary.startswith("ready: the server reported ready 2m14s after the first log record")


def test_2025_boot_order_with_draft_and_draft_extend_graphs() -> None:
    report = analyze("sglang_tp8_eagle3_2025_ready.log")
    assert report.state == "ready"
    assert phase_keys(report) == [
        ("init-distributed", None, None),
        ("load-weights", "target", None),
        ("kv-cache", "target", None),
        ("cuda-graph", "target", None),
        ("load-weights", "draft", None),
        ("cuda-graph", "draft", None),
        ("cuda-graph", "draft", "extend"),
        ("ready", None, None),
    ]
    extend = report.phases[6]
    assert extend.seconds == pytest.approx(3.4)
    # The 2025 `Load weight end` has no elapsed=: the figure comes from the timestamps.
    assert report.phases[1].seconds == pytest.approx(50.0)


def test_tp8_without_speculation_has_one_model() -> None:
    report = analyze("sglang_tp8_ready.log")
    assert report.state == "ready"
    assert {phase.model for phase in report.phases} == {None, "target"}
    load = report.phases[1]
    assert (load.name, load.ranks, load.end) == ("load-weights", 8, "2025-11-29 10:00:54")
    assert load.seconds == pytest.approx(50.66)  # the slowest rank's logged elapsed=
    assert load.slowest_rank is not None and load.slowest_rank.startswith("TP")


def test_tp1_log_has_untagged_ranks_and_millisecond_timestamps() -> None:
    report = analyze("sglang_tp1_ready.log")
    assert report.state == "ready"
    assert all(phase.ranks == 1 and phase.slowest_rank is None for phase in report.phases)
    assert report.phases[0].start == "2025-11-29 10:00:03.000"
    assert report.phases[1].seconds == pytest.approx(50.38)


def test_tp16_log_counts_sixteen_ranks() -> None:
    report = analyze("sglang_tp16_eagle3_ready.log")
    assert report.state == "ready"
    assert [phase.ranks for phase in report.phases if phase.name != "ready"] == [16] * 7
    assert report.warnings == ()


def test_node_of_a_multi_node_boot_is_not_missing_the_other_nodes_ranks() -> None:
    report = analyze("sglang_tp16_node0_partial.log")
    assert report.state == "load-weights"
    assert report.warnings == ()
    assert "not yet logged on 8 of 8 ranks" in report.summary


def test_crash_is_failed_with_the_error_line_and_rank() -> None:
    report = analyze("sglang_tp8_eagle3_crash.log")
    assert report.state == "failed" and not report.ready
    assert report.error is not None and report.error.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert report.summary.startswith("failed while loading draft weights: TP3 logged torch.OutOfMemoryError")
    assert report.warnings[0].startswith("failed: TP3 at 2025-11-29 10:01:08 during load-weights (draft)")
    assert any("Received sigquit" in warning for warning in report.warnings)


def test_stalled_draft_bar_is_warned_about() -> None:
    report = analyze("sglang_tp8_eagle3_stall.log")
    assert report.state == "load-weights"
    stalls = [warning for warning in report.warnings if warning.startswith("stalled:")]
    assert len(stalls) == 1
    assert "(draft) has been at 12/64 since 2025-11-29 10:01:01" in stalls[0]
    assert "6m01s without progress" in stalls[0]
    assert "the bar has not moved for 6m01s" in report.summary


def test_stall_threshold_is_configurable() -> None:
    report = analyze("sglang_tp8_eagle3_stall.log", stall_after_s=3600)
    assert not any(warning.startswith("stalled:") for warning in report.warnings)


def test_missing_ranks_are_named() -> None:
    report = analyze("sglang_tp8_missing_rank.log")
    assert report.state == "load-weights"
    assert report.warnings == ("init-distributed: not logged by TP5 (7 of 8 ranks)",)
    assert report.summary == (
        "loading target weights: 64/64 shards read, `Load weight end` not yet logged on 1 of 8 ranks "
        "- CUDA graph capture has not started [model /data/kimi-k2-instruct]"
    )
    assert report.phases[1].slowest_rank == "TP3"


def test_vllm_log_with_colours_and_worker_prefixes() -> None:
    report = analyze("vllm_tp4_ready.log")
    assert report.framework == "vllm"
    assert report.state == "ready"
    assert report.filesystem == "nfs4"
    assert phase_keys(report) == [
        ("load-weights", "target", None),
        ("kv-cache", "target", None),
        ("cuda-graph", "target", None),
        ("ready", None, None),
    ]
    load = report.phases[0]
    assert (load.ranks, load.slowest_rank) == (4, "rank3")
    assert load.seconds == pytest.approx(31.1)
    assert report.progress[0].done == 30 and report.progress[0].rate == pytest.approx(1 / 1.01)
    assert report.warnings == ()


def test_binary_garbage_is_an_unknown_format() -> None:
    report = analyze("garbage.bin")
    assert (report.framework, report.state, report.phases) == ("unknown", "starting", ())
    # AND it says what it looked for (#33 item 1)
    assert report.summary.startswith("no SGLang or vLLM boot records found")
    assert "record prefixes" in report.summary and "module paths" in report.summary


def test_huge_line_is_capped_and_the_rest_still_parses() -> None:
    report = analyze("huge_line.log")
    assert report.state == "ready"
    assert len(report.phases) == 5


@pytest.mark.parametrize("name", sorted(path.name for path in LOGS.glob("*.log")))
def test_feeding_in_random_pieces_gives_the_same_report(name: str) -> None:
    """What --follow sees (arbitrary read boundaries) must equal a whole-file read."""
    data = (LOGS / name).read_bytes()
    rng = random.Random(name)
    analyzer = BootLogAnalyzer()
    splitter = LineSplitter()
    position = 0
    while position < len(data):
        size = rng.randint(1, 4096)
        analyzer.feed_block(splitter.feed(data[position : position + size]))
        position += size
    analyzer.feed_block(splitter.flush())
    assert analyzer.report() == analyze(name)


def test_a_restarted_server_is_reported_from_its_last_boot() -> None:
    """GIVEN a crashed boot and, appended an hour later, a boot that came up WHEN analysed THEN the report
    is about the second boot, with a warning that the log holds two."""
    crashed = (LOGS / "sglang_tp8_eagle3_crash.log").read_bytes()
    restarted = (
        (LOGS / "sglang_tp8_eagle3_newer_ready.log")
        .read_bytes()
        .replace(b"2025-11-29 10:", b"2025-11-29 11:")
    )
    report = analyze_bytes(crashed + restarted)
    assert report.state == "ready"
    assert report.first_timestamp == "2025-11-29 11:00:00"
    assert report.warnings == (
        "the log holds 2 boots; this report covers the last one (--boot N picks another)",
    )
    assert report.boots == 2 and report.boot == 2
    assert len(report.phases) == 8


def sglang(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def test_traceback_the_rank_survives_is_only_a_warning() -> None:
    report = analyze_bytes(
        sglang(
            [
                "[2025-11-29 10:00:00 TP0] Init torch distributed begin.",
                "[2025-11-29 10:00:01 TP0] Failed to import a kernel: Traceback (most recent call last):",
                '  File "x.py", line 1, in <module>',
                "ImportError: cannot import name 'fused_moe'",
                "[2025-11-29 10:00:02 TP0] Init torch distributed ends. elapsed=2.00 s, mem usage=0.1 GB",
                "[2025-11-29 10:00:03 TP0] Load weight begin. avail mem=60.81 GB",
            ]
        )
    )
    assert report.state == "load-weights"
    assert report.warnings == (
        "error logged by TP0 at 2025-11-29 10:00:01 during init-distributed (the boot went on): "
        "ImportError: cannot import name 'fused_moe'",
    )


def test_request_traceback_after_ready_keeps_the_server_ready() -> None:
    report = analyze_bytes(
        sglang(
            [
                "[2025-11-29 10:00:00] The server is fired up and ready to roll!",
                "[2025-11-29 10:05:00 TP0] Error in request: Traceback (most recent call last):",
                "ValueError: prompt too long",
            ]
        )
    )
    assert report.state == "ready"
    assert "after the server was ready" in report.warnings[0]


def test_second_load_is_target_again_without_speculation() -> None:
    lines = ["[2025-11-29 10:00:00] server_args=ServerArgs(tp_size=1, speculative_algorithm=None)"]
    for second in (1, 3):
        lines += [
            f"[2025-11-29 10:00:0{second}] Load weight begin. avail mem=60 GB",
            f"[2025-11-29 10:00:0{second + 1}] Load weight end. elapsed=1.00 s, type=X",
        ]
    report = analyze_bytes(sglang(lines))
    assert [phase.model for phase in report.phases] == ["target"]


def test_vllm_speculative_config_makes_the_second_load_the_drafts() -> None:
    lines = [
        "INFO 11-29 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.10.2) with config: "
        "speculative_config=SpeculativeConfig(method='eagle3'), tensor_parallel_size=1",
        "INFO 11-29 10:00:01 [r.py:1] Starting to load model /m...",
        "INFO 11-29 10:00:09 [r.py:1] Loading weights took 8.00 seconds",
        "INFO 11-29 10:00:10 [r.py:1] Model loading took 9.1 GiB and 9.00 seconds",
        "INFO 11-29 10:00:10 [r.py:1] Starting to load model /draft...",
        "INFO 11-29 10:00:12 [r.py:1] Loading weights took 2.00 seconds",
    ]
    report = analyze_bytes(sglang(lines))
    assert report.framework == "vllm"
    assert [(phase.model, phase.seconds) for phase in report.phases] == [("target", 8.0), ("draft", 2.0)]


@pytest.mark.parametrize("came_up", [True, False], ids=["ready", "still-booting"])
def test_a_phase_whose_end_was_never_logged_ends_when_the_server_was_ready(came_up: bool) -> None:
    # GIVEN graphs captured from 10:00:10 with no end logged, then the server ready at 10:00:40 (or not yet) and
    # serving until 10:05:00
    lines = [
        "[2025-11-29 10:00:00 TP0] Load weight begin. avail mem=60.81 GB",
        "[2025-11-29 10:00:08 TP0] Load weight end. elapsed=8.00 s, type=X",
        "[2025-11-29 10:00:10 TP0] Capture cuda graph begin. This can take up to several minutes.",
        *(["[2025-11-29 10:00:40] The server is fired up and ready to roll!"] if came_up else []),
        # a request's prefill: served once up, or the warm-up's own (decode statistics would say it serves: batch 57)
        "[2025-11-29 10:05:00 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0",
    ]
    report = analyze_bytes(sglang(lines))
    graphs = next(phase for phase in report.phases if phase.name == "cuda-graph")
    assert (graphs.start, graphs.end) == ("2025-11-29 10:00:10", None)
    # THEN in a boot that came up it lasted until the server was ready (30 s), not until the log's last line;
    # in one still booting it is still running: until the last line (290 s)
    assert (report.state, graphs.seconds) == (("ready", 30.0) if came_up else ("cuda-graph", 290.0))


def test_end_without_begin_opens_the_phase_from_its_elapsed() -> None:
    report = analyze_bytes(sglang(["[2025-11-29 10:00:50 TP0] Load weight end. elapsed=48.44 s, type=X"]))
    phase = report.phases[0]
    assert (phase.start, phase.end, phase.seconds) == ("2025-11-29 10:00:01", "2025-11-29 10:00:50", 48.44)


def test_report_is_json_ready_even_without_timestamps() -> None:
    report = analyze_bytes(
        b"Load weight begin.\n\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01, ?it/s]\n"
    )
    assert report.state == "load-weights"
    assert report.to_dict()["progress"] == [
        {
            "desc": "Loading safetensors checkpoint shards",
            "model": "target",
            "done": 1,
            "total": 2,
            "rate": None,
            "elapsed_s": 1,
            "eta_s": 1,
        }
    ]


def test_multi_megabyte_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """GIVEN a TP1 boot with a 6 MB line inside and 3 MB of traffic after it WHEN analysed from disk
    THEN it parses, and Python never holds more than a few MB at once (the file is streamed, the line capped)."""
    boot = (LOGS / "sglang_tp1_ready.log").read_bytes()
    cut = boot.index(b"[2025-11-29 10:00:04")
    filler = b"[2025-11-29 10:02:00.000] Decode batch. #running-req: 12, #token: 34567, token usage: 0.12\n"
    path = tmp_path / "server.log"
    with path.open("wb") as log:
        log.write(boot[:cut])
        log.write(b"[2025-11-29 10:00:03.900] config dump: " + b"Error-free " * 600_000 + b"\n")
        log.write(boot[cut:])
        log.write(filler * 33_000)
    assert path.stat().st_size > 9_000_000
    tracemalloc.start()
    try:
        report = analyze_path(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.state == "ready"
    assert peak < 5_000_000, f"peak {peak / 1e6:.1f} MB"


def test_a_restart_that_has_logged_only_its_configuration_is_already_that_engines_boot() -> None:
    """GIVEN a crashed boot and then only the restarted server's `server_args=ServerArgs(...)` line THEN the new
    boot is SGLang's, starting (the configuration line counts for the boot it opens)."""
    crashed = (LOGS / "sglang_tp8_eagle3_crash.log").read_bytes()
    restart = b"[2025-11-29 12:00:00] server_args=ServerArgs(model_path='/data/m', tp_size=8)\n"
    report = analyze_bytes(crashed + restart)
    assert (report.framework, report.state, report.boots) == ("sglang", "starting", 2)


def test_a_server_that_crashed_before_any_phase_is_a_boot_of_its_own() -> None:
    """GIVEN a traceback alone (a server that died before it logged a phase) and then another server's
    `server_args=ServerArgs(...)` THEN the log holds two boots: the crash reads as it did alone, failed in the
    first, and the restart starts the second. A death word without a traceback is not enough (#33)."""
    crash = (
        b"Traceback (most recent call last):\n"
        b'  File "/usr/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1816, in run\n'
        b"RuntimeError: CUDA out of memory\n"
    )
    restart = b"[2025-11-29 12:00:00] server_args=ServerArgs(model_path='/data/m', tp_size=8)\n"
    alone = analyze_bytes(crash)
    report = analyze_bytes(crash + restart)
    assert (report.framework, report.state, report.boots) == ("sglang", "starting", 2)
    first = analyze_bytes(crash + restart, boot=1)
    assert alone.failure is not None and first.failure is not None
    assert (first.framework, first.state, first.failure.error, first.failure.rank) == (
        alone.framework,
        "failed",
        "RuntimeError: CUDA out of memory",
        alone.failure.rank,
    )
    # An engine's word that it failed, with no traceback, does not end the boot: the configuration after it is
    # still read as this boot's (a launcher may print its failure before the server's own configuration line).
    died = b"[2025-11-29 11:59:59] sglang is dead\n"
    assert analyze_bytes(died + restart).boots == 1


def test_frames_redrawn_on_one_line_report_as_frames_on_lines_of_their_own() -> None:
    """GIVEN a bar redrawn 60 times after carriage returns on one physical line, a second bar on the same line,
    and the same frames one per line WHEN both are analysed THEN they report the same bars and phases."""
    frames = [
        f"Loading safetensors checkpoint shards: {100 * done // 60:3d}% Completed | {done}/60 [00:{done:02d}<00:10, 1.20it/s]"
        for done in range(61)
    ]
    capture = [
        f"Capturing batches (bs={bs} avail_mem=7.05 GB):  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]"
        for bs in (8, 4)
    ]
    head = (
        "[2025-11-29 10:00:00] server_args=ServerArgs(tp_size=1, speculative_algorithm=None)\n"
        "[2025-11-29 10:00:01] Load weight begin. avail mem=78.00 GB\n"
    )
    tail = "\n[2025-11-29 10:01:00] Load weight end. type=LlamaForCausalLM, avail mem=70.00 GB\n"
    on_one_line = analyze_bytes((head + "\r".join(frames + capture) + tail).encode())
    on_their_own = analyze_bytes((head + "\n".join(frames + capture) + tail).encode())
    assert on_one_line.progress == on_their_own.progress
    assert [p.desc for p in on_one_line.progress] == [
        "Loading safetensors checkpoint shards",
        "Capturing batches",
    ]
    assert (on_one_line.progress[0].done, on_one_line.progress[0].total) == (60, 60)
    assert on_one_line.phases == on_their_own.phases


def test_a_message_read_once_is_read_again_with_the_tables_of_another_style() -> None:
    """GIVEN the same vLLM-only message first inside an SGLang record, then on a line of its own
    WHEN the analyzer reuses what it read of recent messages THEN the SGLang record still means nothing (only
    SGLang's table reads it) and the bare line still opens vLLM's capture phase (both tables read it)."""
    message = "Capturing the model for CUDA graphs. This may lead to unexpected consequences."
    sglang_only = analyze_bytes(f"[2025-01-01 10:00:00 TP0] {message}\n".encode())
    assert all(phase.name != "cuda-graph" for phase in sglang_only.phases)
    both = analyze_bytes(
        f"[2025-01-01 10:00:00 TP0] {message}\nINFO 01-01 10:00:01 [a.py:1] x\n{message}\n".encode()
    )
    assert [phase.name for phase in both.phases if phase.name == "cuda-graph"] == ["cuda-graph"]


def test_a_capture_logged_size_by_size_opens_one_graph_phase_that_its_end_record_closes() -> None:
    tag = "(EngineCore_0 pid=7) INFO 08-19 07:06:{:02d} [gpu_model_runner.py:2721] "
    lines = [
        tag.format(35) + "Graph capturing for 304 input tokens",
        tag.format(35) + "                        finished in 0.050 secs, took 24.00 MiB",
        tag.format(36) + "Graph capturing for 296 input tokens",
    ]
    report = analyze_bytes("\n".join(lines).encode() + b"\n")
    assert report.state == "cuda-graph"
    assert [(phase.name, phase.model, phase.end) for phase in report.phases] == [
        ("cuda-graph", "target", None)
    ]
    ended = analyze_bytes(
        "\n".join([*lines, tag.format(40) + "Graph capturing finished in 5 secs, took 0.40 GiB"]).encode()
    )
    assert [(phase.name, phase.seconds) for phase in ended.phases] == [("cuda-graph", 5.0)]


EXCERPT_OF_A_LOAD = (
    b"Loading safetensors checkpoint shards:  96% Completed | 53/55 [03:35<00:06,  3.18s/it]\n"
    b"[17:43:23 TP6] Load weight end. type=DeepseekV2ForCausalLM, dtype=torch.bfloat16, avail mem=20.62 GB\n"
    b"[17:43:23 TP7] Load weight end. type=DeepseekV2ForCausalLM, dtype=torch.bfloat16, avail mem=20.91 GB\n"
    b"Loading safetensors checkpoint shards: 100% Completed | 55/55 [03:41<00:00,  3.24s/it]\n"
)


def test_an_untagged_bar_is_no_extra_rank_where_the_ranks_are_tagged_by_number() -> None:
    """GIVEN an excerpt of a load: SGLang's untagged bar (rank 0 draws it) and two ranks' `Load weight end`,
    rank 0's own records above the excerpt THEN the load is on the 2 ranks that logged it, and ended (#33)."""
    report = analyze_bytes(EXCERPT_OF_A_LOAD)
    (load,) = report.phases
    assert (load.name, load.model, load.ranks, load.end) == ("load-weights", "target", 2, "17:43:23")


def test_an_untagged_bar_is_the_drivers_where_workers_are_tagged_by_process_id() -> None:
    """GIVEN vLLM V0's workers, tagged by pid, and the untagged bar of the driver (rank 0, untagged) THEN the
    driver is one more rank of the load."""
    v0 = (
        b"Loading safetensors checkpoint shards: 100% Completed | 17/17 [01:20<00:00, 4.75s/it]\n"
        b"(VllmWorkerProcess pid=185224) INFO 03-02 17:57:18 [model_runner.py:1117] Loading model weights took "
        b"8.4050 GB and 81.775431 seconds\n"
    )
    (load,) = analyze_bytes(v0).phases
    assert (load.name, load.ranks) == ("load-weights", 2)


def test_workers_tagged_by_process_id_are_not_numbered_ranks() -> None:
    """GIVEN a vLLM V0 TP2 boot (the driver untagged, its worker `(VllmWorkerProcess pid=185224)`) WHEN it is read
    THEN no rank is said to be silent: a process id numbers no rank, so the configuration's world of 2 does not make
    ranks pid0 and pid1 up (batch 37's Ray and multiprocessing boots each warned of pid0 to pid7)."""
    v0 = (
        b"INFO 03-02 17:55:50 llm_engine.py:232] Initializing an LLM engine (v0.6.6.post1) with config: model='m', "
        b"tensor_parallel_size=2, pipeline_parallel_size=1\n"
        b"INFO 03-02 17:55:57 model_runner.py:1092] Starting to load model m...\n"
        b"(VllmWorkerProcess pid=185224) INFO 03-02 17:55:57 model_runner.py:1092] Starting to load model m...\n"
        b"INFO 03-02 17:57:18 model_runner.py:1117] Loading model weights took 8.4050 GB and 81.775431 seconds\n"
        b"(VllmWorkerProcess pid=185224) INFO 03-02 17:57:18 model_runner.py:1117] Loading model weights took "
        b"8.4050 GB and 81.775431 seconds\n"
    )
    report = analyze_bytes(v0)
    assert [(phase.name, phase.ranks) for phase in report.phases] == [("load-weights", 2)]
    assert report.warnings == (), report.warnings


def test_a_boot_that_the_next_servers_start_ends_runs_until_its_own_last_line() -> None:
    """GIVEN a vLLM boot cut while loading, its last line one no rule reads (`Using model weights format`, 3 s
    after the load began), then an SGLang server's start (dated lines before its ServerArgs) THEN the first
    boot's open load ran 3 s, as it does alone: not ended at its last record, nor at the next server's time."""
    first = (
        b"INFO 10-23 12:30:01 model_runner.py:1008] Starting to load model /data/m...\n"
        b"INFO 10-23 12:30:04 weight_utils.py:243] Using model weights format ['*.safetensors']\n"
    )
    second = (
        b"[2026-08-01 23:37:39] WARNING something before the server's configuration\n"
        b"[2026-08-01 23:37:40] server_args=ServerArgs(model_path='/data/m', tp_size=1)\n"
    )
    (alone,) = analyze_bytes(first).phases
    (load,) = analyze_bytes(first + second, boot=1).phases
    assert (alone.name, alone.seconds) == ("load-weights", 3.0)
    assert (load.name, load.seconds, analyze_bytes(first + second).boots) == ("load-weights", 3.0, 2)


def test_one_engines_configuration_after_anothers_is_another_server() -> None:
    """GIVEN a vLLM engine's configuration and nothing else of it, then an SGLang server's THEN two boots, the
    first vLLM's: one server is configured by one engine, with or without progress between (#33)."""
    vllm = (
        b"INFO 12-20 00:49:35 llm_engine.py:237] Initializing an LLM engine (vdev) with config: model='/m'\n"
    )
    sglang = b"[2026-08-01 23:37:40] server_args=ServerArgs(model_path='/data/m', tp_size=1)\n"
    report = analyze_bytes(vllm + sglang)
    assert (report.boots, report.framework) == (2, "sglang")
    assert analyze_bytes(vllm + sglang, boot=1).framework == "vllm"
    # One engine's own two configuration lines (vLLM's API server banner, then its engine's) stay one boot.
    banner = b"INFO 12-20 00:49:34 api_server.py:151] vLLM API server version 0.6.5\n"
    assert analyze_bytes(banner + vllm).boots == 1


def test_an_engine_core_tagged_by_its_dp_rank_beside_tagged_workers_is_no_rank() -> None:
    """GIVEN vLLM TP4 whose engine core is tagged `(EngineCore_DP0 pid=..)` (0.11 on) or `(EngineCore_0 pid=..)`
    (0.9-0.10) beside `(VllmWorker rank=N ..)` workers THEN the core sizes the KV cache but is no fifth rank: the
    load is on 4 of 4 ranks and nothing warns that DP0 logged no load (it did, before: '4 of 5 ranks')."""
    for core in (b"EngineCore_DP0", b"EngineCore_0"):
        data = (LOGS / "vllm_tp4_ready.log").read_bytes().replace(b"EngineCore_0", core)
        report = analyze_bytes(data)
        assert report.warnings == (), core
        assert [(phase.name, phase.ranks) for phase in report.phases[:2]] == [
            ("load-weights", 4),
            ("kv-cache", 1),
        ]


def test_engine_cores_tagged_by_dp_rank_alone_are_the_ranks_when_no_worker_is_tagged() -> None:
    """GIVEN four vLLM 0.10 data-parallel engine cores, TP 1 each (`(EngineCore_0 pid=..)` .. `_3`), each logging
    its own load THEN four ranks loaded the target, once each (vllm-ascend#2125 read them as one rank loading a
    target and then a draft)."""
    lines = [
        f"(EngineCore_{dp} pid={100 + dp}) INFO 08-13 02:23:3{dp} [default_loader.py:262] Loading weights took "
        f"{9 + dp}.93 seconds"
        for dp in range(4)
    ]
    report = analyze_bytes("\n".join(lines).encode() + b"\n")
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [
        ("load-weights", "target", 4)
    ]
