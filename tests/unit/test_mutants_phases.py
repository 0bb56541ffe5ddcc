"""The boot-log state machine (ckptprof/bootlog/phases.py), pinned where mutation testing found it unchecked
(issue #36).

Each test builds a small SGLang or vLLM boot log line by line (or reads one of the real logs under
tests/fixtures/logs/real/) and asserts what the public entry points return: the whole phase table, the
progress bars, the warnings, the failure and the summary sentence.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ckptprof.bootlog import BootReport, analyze_bytes, analyze_path, analyze_stream
from ckptprof.bootlog.boot_report import UNKNOWN_ENGINE_WARNING
from ckptprof.bootlog.parse import LogInputError
from ckptprof.bootlog.phases import BootLogAnalyzer
from ckptprof.bootlog.report import FailureReport, PhaseReport

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
BAR = "Loading safetensors checkpoint shards"


def sg(time: str, rank: str, message: str, day: str = "2025-11-29") -> str:
    """One SGLang record: ``[date time rank] message`` (no rank tag when ``rank`` is empty)."""
    tag = f" {rank}" if rank else ""
    return f"[{day} {time}{tag}] {message}"


def vl(time: str, worker: str, message: str, level: str = "INFO") -> str:
    """One vLLM record behind a worker prefix (``worker`` empty: none), year-less as vLLM prints it."""
    prefix = f"({worker}) " if worker else ""
    return f"{prefix}{level} 11-29 {time} [x.py:1] {message}"


def frame(done: int, total: int, desc: str = BAR, elapsed: str = "00:01", rate: str = "1.00it/s") -> str:
    pct = 100 * done // total
    return f"{desc}: {pct:3d}% Completed | {done}/{total} [{elapsed}<00:01, {rate}]"


def log(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def table(report: BootReport) -> list[tuple[object, ...]]:
    return [
        (p.name, p.model, p.variant, p.start, p.end, p.seconds, p.ranks, p.slowest_rank)
        for p in report.phases
    ]


def bars(report: BootReport) -> list[tuple[object, ...]]:
    return [(b.desc, b.model, b.done, b.total) for b in report.progress]


# --------------------------------------------------------------------------------- phases without an end


def test_a_phase_left_open_on_one_rank_lasts_until_the_server_was_ready_not_until_the_last_line() -> None:
    lines = [
        sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm=None)"),
        sg("10:00:04", "TP0", "Load weight begin. avail mem=139.12 GB"),
        sg("10:00:04", "TP1", "Load weight begin. avail mem=139.12 GB"),
        sg("10:00:30", "TP1", "Load weight end. elapsed=26.00 s"),
        sg("10:01:00", "", "The server is fired up and ready to roll!"),
        sg("10:05:00", "", "INFO:     127.0.0.1:5000 - GET /health HTTP/1.1 200 OK"),
    ]
    report = analyze_bytes(log(*lines))
    assert report.state == "ready"
    assert table(report) == [
        # TP0 never logged its end: it counts until ready (56 s), not until 10:05:00 (296 s)
        ("load-weights", "target", None, "2025-11-29 10:00:04", None, 56.0, 2, "TP0"),
        ("ready", None, None, "2025-11-29 10:00:30", "2025-11-29 10:01:00", 30.0, 1, None),
    ]
    assert report.last_timestamp == "2025-11-29 10:05:00"
    assert report.warnings == ()
    # the summary names the same 56 s as the table (it said 4m56s: timed to the log's last line)
    assert report.summary.endswith("; longest phase: load-weights (target) 56.0 s"), report.summary


# ----------------------------------------------------------------------------------------- several boots


def _boot(hour: str, *more: str, day: str = "2025-11-29") -> list[str]:
    return [
        sg(f"{hour}:00:00", "", "server_args=ServerArgs(tp_size=1)", day),
        sg(f"{hour}:00:03", "", "Init torch distributed begin.", day),
        sg(f"{hour}:00:05", "", "Init torch distributed ends. elapsed=2.00 s", day),
        *more,
    ]


def _three_boots() -> BootLogAnalyzer:
    analyzer = BootLogAnalyzer()
    analyzer.feed_block(
        log(
            *_boot("10"),
            *_boot(
                "11",
                "ERROR 11-29 11:00:05 [x.py:1] flaky",
                sg("11:00:06", "", "Load weight begin."),
            ),
            *_boot("12"),
        )
    )
    analyzer.feed_line(sg("12:00:09", "", "Load weight begin."))
    return analyzer


def test_each_boot_of_a_restarted_server_is_reported_on_its_own_and_says_which_it_is() -> None:
    analyzer = _three_boots()
    assert analyzer.boots == 3
    last = analyzer.report()
    assert (last.boots, last.boot, last.state) == (3, 3, "load-weights")
    assert last.warnings == (
        "the log holds 3 boots; this report covers the last one (--boot N picks another)",
    )
    assert [(p.name, p.start, p.seconds) for p in last.phases] == [
        ("init-distributed", "2025-11-29 12:00:03", 2.0),
        ("load-weights", "2025-11-29 12:00:09", 0.0),
    ]
    for boot in (1, -3):
        first = analyzer.report(boot)
        assert (first.boots, first.boot, first.state) == (3, 1, "init-distributed")
        assert first.warnings == (
            "the log holds 3 boots; this report covers boot 1 (--boot N picks another)",
        )
        assert table(first) == [
            ("init-distributed", None, None, "2025-11-29 10:00:03", "2025-11-29 10:00:05", 2.0, 1, None)
        ]
        # A finished boot ends at its own last record, not at the next server's first (97280d5).
        assert (first.first_timestamp, first.last_timestamp) == ("2025-11-29 10:00:00", "2025-11-29 10:00:05")
    second = analyzer.report(2)
    assert (second.boot, second.state) == (2, "load-weights")
    assert second.warnings == (
        "the log holds 3 boots; this report covers boot 2 (--boot N picks another)",
        "error logged by the main process at 2025-11-29 11:00:05 after init-distributed (the boot went on): flaky",
    )
    assert [(p.name, p.start, p.seconds) for p in second.phases] == [
        ("init-distributed", "2025-11-29 11:00:03", 2.0),
        # open: it runs to the boot's own last record, not into the next server's first (97280d5)
        ("load-weights", "2025-11-29 11:00:06", 0.0),
    ]
    assert analyzer.report(-2) == second
    # asking for an older boot leaves the analyzer on the last one
    assert analyzer.report() == last == analyzer.report(3) == analyzer.report(-1)
    analyzer.feed_line(sg("12:00:19", "", "Load weight end. elapsed=10.00 s"))
    assert analyzer.report().phases[1].end == "2025-11-29 12:00:19"


@pytest.mark.parametrize("boot", [0, 4, -4, 7])
def test_a_boot_the_log_does_not_hold_is_refused_with_the_count(boot: int) -> None:
    with pytest.raises(LookupError) as caught:
        _three_boots().report(boot)
    assert str(caught.value) == "the log holds 3 boots"


def test_a_one_boot_log_says_boot_in_the_singular() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_block(log(*_boot("10")))
    with pytest.raises(LookupError) as caught:
        analyzer.report(2)
    assert str(caught.value) == "the log holds 1 boot"
    assert analyzer.report(1).warnings == () and analyzer.report(1).boots == 1


def test_of_many_boots_the_first_sixteen_and_the_last_seventeen_are_kept() -> None:
    analyzer = BootLogAnalyzer()
    lines = [
        line for hour in range(40) for line in _boot(f"{hour % 24:02d}", day=f"2025-11-{10 + hour // 24}")
    ]
    analyzer.feed_block(log(*lines))
    assert analyzer.boots == 40
    with pytest.raises(LookupError) as caught:
        analyzer.report(20)
    assert str(caught.value) == "boot 20 of 40 was not kept: the first 16 and the last 17 are"
    assert analyzer.report(16).phases[0].start == "2025-11-10 15:00:03"
    assert analyzer.report(24).phases[0].start == "2025-11-10 23:00:03"  # the first of the last 17
    for dropped in (17, 23):
        with pytest.raises(LookupError):
            analyzer.report(dropped)


# ------------------------------------------------------------------------------------ sizes in server_args


def _first_rank_only(server_args: str) -> BootReport:
    return analyze_bytes(
        log(sg("10:00:00", "", server_args), sg("10:00:03", "TP0", "Init torch distributed begin."))
    )


@pytest.mark.parametrize(
    ("server_args", "world"),
    [
        # a key inside a longer name (attn_tp_size, x_tp_size, draft_tp_size) is not the key, before or after it
        ("server_args=ServerArgs(attn_tp_size=2, tp_size=4, speculative_draft_tp_size=1)", 4),
        ("server_args=ServerArgs(x_tp_size=3, tp_size=2)", 2),
        ("server_args=ServerArgs(tp_size=4, draft_tp_size=1, ep_tp_size=2)", 4),
        ("server_args=ServerArgs(mtp_size=2,tp_size=3)", 3),
        # the key may open the message
        ("tp_size=4 ServerArgs(dp_size=1)", 4),
        # pipeline stages multiply the world; data-parallel replicas too, unless attention is data-parallel
        ("server_args=ServerArgs(tp_size=2, pp_size=2, dp_size=1)", 4),
        ("server_args=ServerArgs(tp_size=2, dp_size=3)", 6),
        ("server_args=ServerArgs(tp_size=4, dp_size=4, enable_dp_attention=True)", 4),
    ],
)
def test_the_declared_world_comes_from_whole_key_names(server_args: str, world: int) -> None:
    report = _first_rank_only(server_args)
    silent = ", ".join(f"TP{n}" for n in range(1, world))
    assert report.warnings == (f"{silent} logged no boot record at all (1 of {world} ranks did)",)
    assert report.summary == (
        "initialising torch.distributed: `Init torch distributed ends` not yet logged on "
        f"{world} of {world} ranks - no weights loaded yet"
    )


@pytest.mark.parametrize(
    "server_args",
    [
        "server_args=ServerArgs(tp_size=auto, dp_size=2)",
        "server_args=ServerArgs(attn_tp_size=4)",
        "server_args=ServerArgs(tp_size=2, nnodes=2)",  # one node's log: the other node's ranks are elsewhere
    ],
)
def test_no_missing_ranks_without_a_whole_numeric_tp_size_on_one_node(server_args: str) -> None:
    report = _first_rank_only(server_args)
    assert report.warnings == ()
    assert report.summary == (
        "initialising torch.distributed: `Init torch distributed ends` not yet logged - no weights loaded yet"
    )


def test_a_vllm_engine_config_names_the_world_with_its_own_keys() -> None:
    report = analyze_bytes(
        log(
            vl(
                "10:00:00",
                "EngineCore_0 pid=5",
                "Initializing a V1 LLM engine (v0.10.2) with config: "
                "model='/m', tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1",
            ),
            vl("10:00:01", "VllmWorker rank=0 pid=10", "Starting to load model /m..."),
        )
    )
    assert report.framework == "vllm"
    assert report.warnings == ("rank1 logged no boot record at all (1 of 2 ranks did)",)


# ---------------------------------------------------------------------------------------------- failures

NO_SPEC = sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm=None)")


def test_a_bare_assertion_is_named_with_the_code_line_above_it() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:03", "", "Load weight begin."),
            sg("10:00:04", "", "Scheduler hit an exception: Traceback (most recent call last):"),
            '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
            "    assert self.store_dtype == torch.uint8",
            "AssertionError",
        )
    )
    error = "AssertionError at `assert self.store_dtype == torch.uint8`"
    assert report.state == "failed" and report.error == error
    assert report.failure == FailureReport("", "load-weights", "target", None, error, "2025-11-29 10:00:04")
    assert report.summary == f"failed while loading target weights: the main process logged {error}"
    assert report.warnings == (
        f"failed: the main process at 2025-11-29 10:00:04 during load-weights (target): {error}",
    )


def test_the_code_line_above_a_bare_error_is_read_one_line_at_a_time_too() -> None:
    analyzer = BootLogAnalyzer()
    for line in (
        NO_SPEC,
        sg("10:00:03", "", "Load weight begin."),
        sg("10:00:04", "", "Traceback (most recent call last):"),
        '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
        "    assert ok",
        "AssertionError",
    ):
        analyzer.feed_block((line + "\n").encode())
    # fed a line a block, the line above is in another block: the bare error stays bare
    assert analyzer.report().error == "AssertionError"


@pytest.mark.parametrize(
    ("first", "code"),
    [
        ("", "assert ok"),  # the traceback's first line opens the block
        ("x" * 5, "assert ok"),
        ("é", "assert ok"),  # a multi-byte letter before it
        ("", "raise_boom()"),  # a code line at the start of its line
    ],
)
def test_the_code_line_above_a_bare_error_whatever_precedes_the_traceback(first: str, code: str) -> None:
    lines = [first] if first else []
    report = analyze_bytes(
        log(
            *lines,
            "Traceback (most recent call last):",
            '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
            f"    {code}" if code == "assert ok" else code,
            "AssertionError",
        )
    )
    assert report.error == f"AssertionError at `{code}`"


def test_a_traceback_cut_before_its_error_line_says_so_and_follows_the_ended_phase() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:03", "", "Load weight begin."),
            sg("10:00:09", "", "Load weight end. elapsed=6.00 s"),
            sg("10:00:10", "", "Traceback (most recent call last):"),
            '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2, in run',
        )
    )
    error = "Traceback (most recent call last): (the log ends before its error line)"
    assert report.failure == FailureReport(
        "", None, None, "after target weights loaded", error, "2025-11-29 10:00:10"
    )
    assert report.error == "Traceback (most recent call last):"
    assert report.summary == f"failed after target weights loaded: the main process logged {error}"


def test_a_rank_dying_after_its_phase_ended_failed_after_it() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2)"),
            sg("10:00:03", "TP0", "Load weight begin."),
            sg("10:00:09", "TP0", "Load weight end. elapsed=6.00 s"),
            sg("10:00:10", "TP0", "Rank 0 scheduler is dead."),
        )
    )
    assert report.failure == FailureReport(
        "TP0", None, None, "after target weights loaded", "Rank 0 scheduler is dead.", "2025-11-29 10:00:10"
    )
    assert report.warnings == (
        "failed: TP0 at 2025-11-29 10:00:10 after load-weights (target): Rank 0 scheduler is dead.",
        "TP1 logged no boot record at all (1 of 2 ranks did)",
    )


# ------------------------------------------------------------------------------------------------- years


def test_year_less_vllm_records_borrow_the_year_of_the_dated_ones_around_them() -> None:
    report = analyze_bytes(
        log(
            # a foreign logger's year-less line before the server's first dated record does not start the span
            "INFO 11-29 09:59:58 [__init__.py:1] Automatically detected platform cuda.",
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=1)"),
            "INFO 11-29 10:00:03 [r.py:1] Starting to load model /m...",
            "INFO 11-29 10:00:07 [weight_utils.py:1] Filesystem type for checkpoints: lustre. Checkpoint size: 1 GiB.",
            "INFO 11-29 10:00:09 [r.py:1] Loading weights took 6.00 seconds",
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:03", "2025-11-29 10:00:09", 6.0, 1, None)
    ]
    assert (report.first_timestamp, report.last_timestamp) == ("2025-11-29 10:00:00", "2025-11-29 10:00:09")
    assert report.filesystem == "lustre"


def test_a_log_with_no_dated_record_keeps_its_year_less_stamps() -> None:
    report = analyze_bytes(
        log(
            "INFO 11-29 09:59:58 [__init__.py:1] Automatically detected platform cuda.",
            "INFO 11-29 10:00:03 [r.py:1] Starting to load model /m...",
            "INFO 11-29 10:00:09 [r.py:1] Loading weights took 6.00 seconds",
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "11-29 10:00:03", "11-29 10:00:09", 6.0, 1, None)
    ]
    assert (report.first_timestamp, report.last_timestamp) == ("11-29 09:59:58", "11-29 10:00:09")
    assert report.summary == (
        "target weights loaded on 1 of 1 ranks in 6.0 s; nothing newer logged yet - CUDA graph capture has not started"
        " [model /m]"
    )


def test_the_clock_only_moves_forward() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_line(sg("10:00:00", "", "Load weight begin."))
    analyzer.feed_line(sg("10:00:30", "", "INFO: a request"))
    analyzer.feed_line(sg("10:00:10", "", "INFO: a late writer's older record"))
    report = analyzer.report()
    assert (report.first_timestamp, report.last_timestamp) == ("2025-11-29 10:00:00", "2025-11-29 10:00:30")
    assert report.phases[0].seconds == 30.0


# ------------------------------------------------------------------------------- what the loaders report

W0 = "VllmWorker rank=0 pid=10"
W1 = "VllmWorker rank=1 pid=11"


@pytest.mark.parametrize(
    ("rate", "gibps"),
    [
        ("1.50 GiB/s", 1.5),
        ("1.5GiB/s", 1.5),
        ("1.50 GB/s", 1.397),  # 1.5e9 / 2**30, to 4 decimals
        ("1536 MiB/s", 1.5),
        ("1500 MB/s", 1.397),
        ("1.23456 GiB/s", 1.2346),
    ],
)
def test_the_streamers_throughput_is_converted_to_gibibytes(rate: str, gibps: float) -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:05", W0, f"Overall time to stream 15 GiB of all files: 10.0s, {rate}"),
        )
    )
    assert report.throughput_GiBps == gibps


def test_a_throughput_line_without_a_rate_reports_none() -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:05", W0, "Overall time to stream 15 GiB of all files: 10.0s"),
        )
    )
    assert report.throughput_GiBps is None and report.framework == "vllm"


def _vllm_ready(*extra: str) -> bytes:
    return log(
        vl("10:00:00", "APIServer pid=1", "vLLM API server version 0.10.2"),
        vl("10:00:01", W0, "Filesystem type for checkpoints: nfs4. Checkpoint size: 131.42 GiB."),
        vl("10:00:01", W0, "Prefetching checkpoint files into page cache started"),
        vl("10:00:01", W0, "Starting to load model /m..."),
        vl("10:00:01", W1, "Starting to load model /m..."),
        vl("10:00:02", W0, "Loading safetensors using Fastsafetensor loader"),
        *extra,
        vl("10:00:31", W0, "Loading weights took 30.00 seconds"),
        vl("10:00:31", W1, "Loading weights took 29.00 seconds"),
        vl("10:00:40", "EngineCore_0 pid=5", "GPU KV cache size: 1,234 tokens"),
        vl("10:00:41", "APIServer pid=1", "Application startup complete."),
    )


def test_a_vllm_boot_reports_its_filesystem_loader_prefetch_and_phases() -> None:
    report = analyze_bytes(
        _vllm_ready(vl("10:00:03", W0, "Prefetching checkpoint files into page cache finished in 2.5 s"))
    )
    assert (report.framework, report.state) == ("vllm", "ready")
    assert (report.filesystem, report.loader, report.prefetch) == (
        "nfs4",
        "fastsafetensors",
        "finished in 2.5 s",
    )
    assert report.loaders == {} and report.throughput_GiBps is None and report.failure is None
    assert table(report) == [
        ("load-weights", "target", None, "11-29 10:00:01", "11-29 10:00:31", 30.0, 2, "rank0"),
        ("kv-cache", "target", None, "11-29 10:00:31", "11-29 10:00:40", 9.0, 1, None),
        ("ready", None, None, "11-29 10:00:40", "11-29 10:00:41", 1.0, 1, None),
    ]
    assert report.summary == (
        "ready: the server reported ready 41.0 s after the first log record; longest phase: load-weights (target) 30.0 s"
        " [model /m]"
    )
    assert report.warnings == ()
    only_started = analyze_bytes(_vllm_ready())
    assert only_started.prefetch == "started"


@pytest.mark.parametrize(
    ("line", "prefetch"),
    [
        ("Prefetching checkpoint files: 40% (4/10)", "40% (4/10)"),
        (
            "Auto-prefetch is disabled because the checkpoint is on a local disk. If you want it, set X.",
            "disabled because the checkpoint is on a local disk",
        ),
    ],
)
def test_prefetch_progress_and_its_absence_are_reported(line: str, prefetch: str) -> None:
    report = analyze_bytes(log(vl("10:00:01", W0, "Starting to load model /m..."), vl("10:00:02", W0, line)))
    assert report.prefetch == prefetch


# -------------------------------------------------------------------------------------------------- bars


def test_bars_alone_open_their_phases_and_name_the_loader() -> None:
    capture = "Capturing batches (bs=8 avail_mem=7.05 GB):  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]"
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "hello"),
            frame(1, 4),
            frame(4, 4),
            sg("10:00:20", "", "x"),
            capture,
            sg("10:00:30", "", "y"),
        )
    )
    # SGLang's capture bar ("Capturing batches (bs=..)", cuda_graph_runner.py) is evidence of SGLang (batch 7)
    assert (report.framework, report.state) == ("sglang", "cuda-graph")
    assert table(report) == [
        # the load ends where the rank's capture began (#33 item 4), not at the log's last line
        ("load-weights", "target", None, "2025-11-29 10:00:00", "2025-11-29 10:00:20", 20.0, 1, None),
        ("cuda-graph", "target", None, "2025-11-29 10:00:20", None, 10.0, 1, None),
    ]
    assert bars(report) == [(BAR, "target", 4, 4), ("Capturing batches", "target", 1, 2)]
    assert (report.loader, report.loaders) == ("default", {"target": "default"})
    assert report.summary == "capturing target CUDA graphs: 1/2 done, `Capture cuda graph end` not yet logged"
    assert report.warnings == (
        "load-weights (target): `Load weight end` never logged by the main process although the boot moved on",
    )


def test_a_bar_after_ready_opens_no_phase() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "The server is fired up and ready to roll!"),
            frame(1, 4),
            sg("10:00:20", "", "x"),
        )
    )
    assert [p.name for p in report.phases] == ["ready"]
    assert bars(report) == [(BAR, None, 1, 4)]
    assert report.loaders == {} and report.loader == "default"


def test_a_bar_of_unknown_words_belongs_to_the_newest_phase_and_names_no_loader() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            "Processing items:  50%|#####     | 1/2 [00:01<00:01, 1.00it/s]",
            sg("10:00:10", "", "x"),
        )
    )
    assert bars(report) == [("Processing items", "target", 1, 2)]
    assert (report.loader, report.loaders) == (None, {})


@pytest.mark.parametrize(("last", "stalled"), [("10:02:01", True), ("10:02:00", False)])
def test_a_bar_still_for_the_stall_limit_is_stalled(last: str, stalled: bool) -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            frame(5, 10),
            sg("10:00:10", "TP0", "x"),
            sg(last, "TP0", "y"),
        )
    )
    warning = (
        f"stalled: '{BAR}' (target) has been at 5/10 since 2025-11-29 10:00:01 while the log went on to "
        f"2025-11-29 {last} (2m00s without progress)"
    )
    assert report.warnings == ((warning,) if stalled else ())
    assert report.summary.endswith(
        "; the bar has not moved for 2m00s - CUDA graph capture has not started"
        if stalled
        else "`Load weight end` not yet logged - CUDA graph capture has not started"
    )


def test_the_stall_limit_is_the_callers() -> None:
    lines = log(
        NO_SPEC, sg("10:00:01", "TP0", "Load weight begin."), frame(5, 10), sg("10:00:41", "TP0", "y")
    )
    assert (
        analyze_bytes(lines, stall_after_s=40).warnings[0].startswith(f"stalled: '{BAR}' (target) has been")
    )
    assert analyze_bytes(lines, stall_after_s=41).warnings == ()
    assert analyze_stream(io.BytesIO(lines), stall_after_s=40).warnings == analyze_bytes(lines, 40).warnings


@pytest.mark.parametrize(
    "after",
    [
        [frame(10, 10)],  # finished
        [sg("10:00:09", "TP0", "Load weight end. elapsed=8.00 s")],  # its phase ended
    ],
)
def test_a_finished_bar_or_one_whose_phase_ended_is_not_stalled(after: list[str]) -> None:
    lines = [
        NO_SPEC,
        sg("10:00:01", "TP0", "Load weight begin."),
        frame(5, 10),
        *after,
        sg("10:09:00", "TP0", "y"),
    ]
    assert analyze_bytes(log(*lines)).warnings == ()


def test_a_bar_moving_backwards_on_one_line_is_a_new_bar() -> None:
    line = "\r".join([frame(3, 4), frame(1, 4), frame(4, 4)])
    report = analyze_bytes(
        log(NO_SPEC, sg("10:00:01", "", "Load weight begin."), line, sg("10:00:10", "", "x"))
    )
    assert bars(report) == [(BAR, "target", 3, 4), (BAR, "target", 4, 4)]


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        # another total is another bar
        (
            [frame(1, 4), frame(2, 4), frame(1, 8), frame(8, 8)],
            [(BAR, "target", 2, 4), (BAR, "target", 8, 8)],
        ),
        # a bar that did not move is the same bar
        ([frame(2, 4), frame(2, 4), frame(3, 4)], [(BAR, "target", 3, 4)]),
        # a count that went down starts the bar again
        ([frame(2, 4), frame(1, 4), frame(2, 4)], [(BAR, "target", 2, 4), (BAR, "target", 2, 4)]),
        # the parenthesised detail changes frame to frame in one bar
        (
            [
                "Capturing batches (bs=8 avail_mem=7.05 GB):  25%|##  | 1/4 [00:01<00:01, 1.0it/s]",
                "Capturing batches (bs=4 avail_mem=7.00 GB):  50%|##  | 2/4 [00:01<00:01, 1.0it/s]",
            ],
            [("Capturing batches", "target", 2, 4)],
        ),
    ],
)
def test_frames_on_one_line_keep_each_bar(frames: list[str], expected: list[tuple[object, ...]]) -> None:
    head = [NO_SPEC, sg("10:00:01", "", "Load weight begin.")]
    on_one_line = analyze_bytes(log(*head, "\r".join(frames), sg("10:00:10", "", "x")))
    on_their_own = analyze_bytes(log(*head, *frames, sg("10:00:10", "", "x")))
    assert bars(on_one_line) == bars(on_their_own) == expected


# ------------------------------------------------------------------------------- variants, drafts, frames


def test_patterned_graph_records_name_their_model_and_lower_cased_variant() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE3')"),
            sg(
                "10:00:01", "", "Capture target decode cuda graph begin. This can take up to several minutes."
            ),
            sg("10:00:05", "", "Capture target decode CUDA graph end. Time elapsed: 4.00 s."),
            sg("10:00:05", "", "Capture draft VERIFY cuda graph begin."),
            sg("10:00:07", "", "Capture draft VERIFY cuda graph end. Time elapsed: 2.00 s."),
            sg("10:00:08", "", "Capture target something else"),  # the needle without the pattern: nothing
        )
    )
    assert table(report) == [
        ("cuda-graph", "target", "decode", "2025-11-29 10:00:01", "2025-11-29 10:00:05", 4.0, 1, None),
        ("cuda-graph", "draft", "verify", "2025-11-29 10:00:05", "2025-11-29 10:00:07", 2.0, 1, None),
    ]
    assert (
        report.summary
        == "draft verify CUDA graphs captured on 1 of 1 ranks in 2.0 s; nothing newer logged yet"
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # a draft architecture in a load's end makes it the draft's, begun where its elapsed= says
        (
            "Load weight end. elapsed=8.00 s, type=LlamaForCausalLMEagle3, avail mem=1 GB",
            ("load-weights", "draft", None, "2025-11-29 10:00:01", "2025-11-29 10:00:09", 8.0, 1, None),
        ),
        (
            "Load weight end. elapsed=8.00 s, type=LlamaForCausalLM, avail mem=1 GB",
            ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:09", 8.0, 1, None),
        ),
        # only a load's: a memory pool's end stays the target's
        (
            "Memory pool end. elapsed=8.00 s, type=LlamaForCausalLMEagle3, avail mem=1 GB",
            ("kv-cache", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:09", 8.0, 1, None),
        ),
    ],
)
def test_an_end_without_begin_is_the_drafts_when_it_names_a_draft_architecture(
    message: str, expected: tuple[object, ...]
) -> None:
    report = analyze_bytes(
        log(sg("10:00:00", "", "server_args=ServerArgs(tp_size=1)"), sg("10:00:09", "", message))
    )
    assert table(report) == [expected]


# A whole traceback (its first line in the log) with no draft frame is the target's even beside a draft; one cut above
# its start names no model where the server runs a draft (the draft's frames may be the ones cut).
@pytest.mark.parametrize(
    ("speculative", "whole", "model"),
    [
        ("None", True, "target"),
        ("None", False, "target"),
        ("'EAGLE'", True, "target"),
        ("'EAGLE'", False, None),
    ],
)
def test_a_failure_in_a_traceback_frame_names_the_frames_phase(
    speculative: str, whole: bool, model: str | None
) -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", f"server_args=ServerArgs(tp_size=1, speculative_algorithm={speculative})"),
            sg("10:00:01", "", "Init torch distributed begin."),
            sg("10:00:02", "", "Init torch distributed ends. elapsed=1.00 s"),
            sg("10:00:03", "", "Load weight begin."),
            *(["Traceback (most recent call last):"] if whole else []),
            '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 3, in capture',
            "RuntimeError: boom",
        )
    )
    assert report.failure == FailureReport(
        "", "cuda-graph", model, None, "RuntimeError: boom", "2025-11-29 10:00:03"
    )


@pytest.mark.parametrize("phase", ["load-weights", "kv-cache"])
def test_without_speculation_a_failing_phase_is_the_targets(phase: str) -> None:
    begin = {"load-weights": "Load weight begin.", "kv-cache": "KV Cache is allocated. #tokens: 1"}[phase]
    report = analyze_bytes(
        log(NO_SPEC, sg("10:00:03", "TP0", begin), sg("10:00:04", "TP0", "Rank 0 scheduler is dead."))
    )
    assert report.failure == FailureReport(
        "TP0", phase, "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:04"
    )


def test_a_failure_in_init_distributed_names_no_model_even_without_speculation() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:03", "TP0", "Init torch distributed begin."),
            sg("10:00:04", "TP0", "Rank 0 scheduler is dead."),
        )
    )
    assert report.failure == FailureReport(
        "TP0", "init-distributed", None, None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:04"
    )


# ---------------------------------------------------------------------------------- lines found by words


def test_a_dying_line_at_the_very_start_of_the_log_is_read() -> None:
    report = analyze_bytes(b"failed to start the engine core\n")
    assert report.state == "failed"
    assert report.failure == FailureReport("", None, None, None, "failed to start the engine core", None)
    assert report.summary == (
        "failed with no boot phase logged before it: the main process logged failed to start the engine core"
    )


@pytest.mark.parametrize("lead", ["", "\n", "INFO x\n"])
def test_every_line_with_a_small_letter_death_word_is_read_once(lead: str) -> None:
    data = lead.encode() + log(
        sg("10:00:03", "TP0", "Load weight begin."),
        sg("10:00:04", "TP0", "Rank 0 scheduler is dead."),
        sg("10:00:05", "TP1", "Rank 1 scheduler is dead."),
        sg("10:00:06", "TP2", "Rank 2 scheduler is dead. Received sigquit, it failed."),
        sg("10:00:07", "", "Received sigquit from a child process. It usually means the child failed."),
    )
    report = analyze_bytes(data)
    assert report.failure == FailureReport(
        "TP0", "load-weights", "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:04"
    )
    assert [w.split(":")[1] for w in report.warnings] == [
        " TP0 at 2025-11-29 10",
        " TP1 at 2025-11-29 10",
        " TP2 at 2025-11-29 10",
        " the main process at 2025-11-29 10",
    ]
    assert [w.rsplit("): ", 1)[1] for w in report.warnings] == [
        "Rank 0 scheduler is dead.",
        "Rank 1 scheduler is dead.",
        "Rank 2 scheduler is dead. Received sigquit, it failed.",
        "Received sigquit from a child process. It usually means the child failed.",
    ]


# ------------------------------------------------------------------------------- which failure is fatal


def test_a_failed_warmup_is_the_failure_with_its_step() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Capture cuda graph begin."),
            sg("10:00:05", "", "Capture cuda graph end. Time elapsed: 4.00 s"),
            sg("10:00:09", "", "Initialization failed. warmup error: Traceback ..."),
        )
    )
    error = "Initialization failed. warmup error: Traceback ..."
    assert report.state == "failed"
    assert report.failure == FailureReport("", None, None, "the warmup request", error, "2025-11-29 10:00:09")
    assert report.summary == f"failed during the warmup request: the main process logged {error}"
    assert report.warnings == (f"failed: the main process at 2025-11-29 10:00:09: {error}",)


def test_a_death_the_server_came_up_after_is_only_a_warning() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "Rank 0 scheduler is dead."),
            sg("10:00:03", "TP0", "Load weight end. elapsed=2.00 s"),
            sg("10:00:09", "", "The server is fired up and ready to roll!"),
        )
    )
    assert (report.state, report.failure, report.error) == ("ready", None, None)
    assert report.warnings == (
        "error logged by TP0 at 2025-11-29 10:00:02 during load-weights (target) (the boot went on): "
        "Rank 0 scheduler is dead.",
    )


def test_after_ready_a_request_error_and_a_death_are_warnings() -> None:
    """The boot came up: what fails after it (a request, or the server dying) is a warning, and the boot's state stays
    ready, as the corpus's readers read a scheduler's abort after ready (sglang-rdna4-gemma4-26b-tp2-hsa-after-ready)
    and a router's panic after both workers were ready (sglang-sglang_custom-router-two-workers-router-panic)."""
    ready = [NO_SPEC, sg("10:00:09", "", "The server is fired up and ready to roll!")]
    request = analyze_bytes(
        log(*ready, sg("10:00:10", "", "Traceback (most recent call last):"), "ValueError: bad request")
    )
    assert (request.state, request.failure) == ("ready", None)
    assert request.warnings == (
        "error logged by the main process at 2025-11-29 10:00:10 (after the server was ready): ValueError: bad request",
    )
    death = analyze_bytes(log(*ready, sg("10:00:10", "", "Rank 0 scheduler is dead.")))
    assert (death.state, death.failure) == ("ready", None)
    assert death.warnings == (
        "error logged by the main process at 2025-11-29 10:00:10 (after the server was ready): Rank 0 scheduler is "
        "dead.",
    )


@pytest.mark.parametrize("then_moves", [True, False])
def test_an_error_record_is_fatal_only_when_nothing_moved_after_it(then_moves: bool) -> None:
    after = [sg("10:00:03", "TP0", "Load weight end. elapsed=2.00 s")] if then_moves else []
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            "ERROR 11-29 10:00:02 [x.py:1] something bad",
            *after,
        )
    )
    if then_moves:
        assert (report.state, report.failure) == ("load-weights", None)
        assert report.warnings == (
            "error logged by the main process at 2025-11-29 10:00:02 during load-weights (target) (the boot went on): "
            "something bad",
        )
    else:
        assert report.failure == FailureReport(
            "", "load-weights", "target", None, "something bad", "2025-11-29 10:00:02"
        )


@pytest.mark.parametrize(("who", "fatal"), [("TP0", False), ("TP1", True)])
def test_a_traceback_is_survived_only_by_the_rank_that_goes_on(who: str, fatal: bool) -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "Traceback (most recent call last):"),
            sg("10:00:02", "TP0", "ValueError: x"),
            sg("10:00:03", who, "Load weight begin." if who == "TP1" else "Load weight end. elapsed=2.00 s"),
        )
    )
    if fatal:
        assert report.failure == FailureReport(
            "TP0", "load-weights", "target", None, "ValueError: x", "2025-11-29 10:00:02"
        )
    else:
        assert report.failure is None and report.state == "load-weights"


def test_of_several_fatal_failures_the_one_with_frames_then_a_python_error_wins() -> None:
    lines = [
        NO_SPEC,
        sg("10:00:01", "TP0", "Load weight begin."),
        sg("10:00:01", "TP1", "Load weight begin."),
        sg("10:00:02", "TP1", "ERROR: plain error record"),
        sg("10:00:03", "TP0", "Traceback (most recent call last):"),
        sg("10:00:03", "TP0", "ValueError: x"),
    ]
    no_frames = analyze_bytes(log(*lines))
    assert no_frames.failure is not None and no_frames.failure.error == "ValueError: x"
    with_frames = analyze_bytes(
        log(
            *lines,
            sg("10:00:04", "TP1", "Traceback (most recent call last):"),
            sg(
                "10:00:04", "TP1", '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 3, in capture'
            ),
            sg("10:00:04", "TP1", "RuntimeError: y"),
        )
    )
    assert with_frames.failure == FailureReport(
        "TP1", "cuda-graph", "target", None, "RuntimeError: y", "2025-11-29 10:00:04"
    )


# ------------------------------------------------------------------------------------ ready and restarts


def test_uvicorns_startup_line_is_not_sglangs_ready() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            "INFO:     Application startup complete.",
            sg("10:00:05", "", "Load weight end. elapsed=4.00 s"),
        )
    )
    assert report.state == "load-weights" and [p.name for p in report.phases] == ["load-weights"]


def test_a_vllm_engine_configured_again_after_ready_is_a_new_boot() -> None:
    engine = "Initializing a V1 LLM engine (v0.10.2) with config: tensor_parallel_size=1"
    analyzer = BootLogAnalyzer()
    analyzer.feed_block(
        log(
            vl("10:00:00", "", engine),
            vl("10:00:01", "", "Starting to load model /m..."),
            vl("10:00:05", "", "Loading weights took 4.00 seconds"),
            vl("10:00:06", "", engine),  # not ready yet: the same boot
            vl("10:00:07", "", "Application startup complete."),
            vl("10:00:08", "", engine),
        )
    )
    assert analyzer.boots == 2
    with pytest.raises(LookupError) as caught:
        analyzer.report(3)
    assert str(caught.value) == "the log holds 2 boots"
    assert analyzer.report(1).warnings == (
        "the log holds 2 boots; this report covers boot 1 (--boot N picks another)",
    )
    last = analyzer.report()
    assert (last.state, last.phases, last.framework) == ("starting", (), "vllm")
    assert last.summary == "starting: no rank has begun a boot phase yet"
    first = analyzer.report(1)
    assert first.state == "ready"
    assert table(first) == [
        ("load-weights", "target", None, "11-29 10:00:01", "11-29 10:00:05", 4.0, 1, None),
        ("ready", None, None, "11-29 10:00:05", "11-29 10:00:07", 2.0, 1, None),
    ]


# --------------------------------------------------------------------------------- models and lead rank


@pytest.mark.parametrize(
    ("lead", "other", "before"),
    [
        ("TP0", "TP1", []),
        ("DP0 TP0", "DP1 TP0", []),  # TP0 of the second replica is not global rank 0
        (
            "TP0",
            "TP1",
            [sg("10:00:00", "", "Init torch distributed begin.")],
        ),  # an untagged process came first
    ],
)
def test_an_untagged_bar_belongs_to_global_rank_0s_phase(lead: str, other: str, before: list[str]) -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm='EAGLE')"),
            *before,
            sg("10:00:01", other, "Load weight begin."),
            sg("10:00:01", lead, "Load weight begin."),
            sg("10:00:02", other, "Load weight end. elapsed=1.00 s"),
            sg("10:00:02", other, "Load weight begin."),  # the other rank is on the draft already
            frame(1, 4),
            sg("10:00:05", "", "x"),
        )
    )
    assert bars(report) == [(BAR, "target", 1, 4)]
    assert [(p.name, p.model, p.ranks) for p in report.phases if p.name == "load-weights"] == [
        ("load-weights", "target", 2),
        ("load-weights", "draft", 1),
    ]


def test_a_log_that_starts_after_the_targets_load_captures_the_drafts_graphs() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE')"),
            sg("10:00:01", "", "Load weight end. elapsed=1.00 s, type=LlamaForCausalLMEagle3"),
            sg("10:00:02", "", "Capture cuda graph begin."),
            sg("10:00:03", "", "Capture cuda graph end."),
        )
    )
    assert [(p.name, p.model) for p in report.phases] == [("load-weights", "draft"), ("cuda-graph", "draft")]
    assert report.summary == "draft CUDA graphs captured on 1 of 1 ranks in 1.0 s; nothing newer logged yet"


def test_in_the_2025_order_a_load_after_graphs_is_the_drafts() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE')"),
            sg("10:00:01", "", "Capture cuda graph begin."),
            sg("10:00:02", "", "Capture cuda graph end."),
            sg("10:00:03", "", "Load weight begin."),
            sg("10:00:04", "", "Load weight end."),
            sg("10:00:05", "", "Capture cuda graph begin."),
        )
    )
    assert [(p.name, p.model, p.end) for p in report.phases] == [
        ("cuda-graph", "target", "2025-11-29 10:00:02"),
        ("load-weights", "draft", "2025-11-29 10:00:04"),
        ("cuda-graph", "draft", None),
    ]
    assert report.summary == "capturing draft CUDA graphs: `Capture cuda graph end` not yet logged"


def test_a_kv_pool_begins_where_the_ranks_last_phase_ended() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:05", "TP0", "Load weight end. elapsed=4.00 s"),
            sg("10:00:09", "TP0", "KV Cache is allocated. #tokens: 100"),
            sg("10:00:09", "TP0", "TokenToKVPool with 100 tokens"),  # already open: not a second begin
            sg("10:00:12", "TP0", "Memory pool end. avail mem=1 GB"),
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:05", 4.0, 1, None),
        ("kv-cache", "target", None, "2025-11-29 10:00:05", "2025-11-29 10:00:12", 7.0, 1, None),
    ]


# ----------------------------------------------------------------------------------------- input paths


def test_lines_fed_one_at_a_time_read_as_the_whole_block() -> None:
    lines = [
        NO_SPEC,
        "   ",
        "",
        sg("10:00:01", "TP0", "Load weight begin."),
        "\r".join([frame(1, 4), frame(2, 4), frame(3, 4)]),
        "\x1b[1;36m" + sg("10:00:03", "TP0", "Load weight end. elapsed=2.00 s") + "\x1b[0m",
        sg("10:00:04", "TP0", "Rank 0 scheduler is dead."),
    ]
    whole = analyze_bytes(log(*lines))
    analyzer = BootLogAnalyzer()
    for line in lines:
        analyzer.feed_line(line + "\n")
    one_by_one = analyzer.report()
    assert one_by_one == whole
    assert table(whole) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:03", 2.0, 1, None)
    ]
    assert bars(whole) == [(BAR, "target", 3, 4)]
    assert whole.failure == FailureReport(
        "TP0", None, None, "after target weights loaded", "Rank 0 scheduler is dead.", "2025-11-29 10:00:04"
    )


def test_frames_then_a_record_on_one_line_apply_the_newest_frame_first() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_line(NO_SPEC)
    analyzer.feed_line(sg("10:00:01", "", "Load weight begin."))
    analyzer.feed_line(
        "\r".join([frame(1, 4), frame(3, 4), sg("10:00:03", "", "Load weight end. elapsed=2.00 s")])
    )
    analyzer.feed_line(sg("10:09:00", "", "Capture cuda graph begin."))
    report = analyzer.report()
    assert bars(report) == [(BAR, "target", 3, 4)]
    assert report.warnings == ()


def test_a_stream_is_read_in_blocks_and_each_block_counted() -> None:
    data = log(
        NO_SPEC,
        sg("10:00:01", "", "Load weight begin."),
        sg("10:00:03", "", "Load weight end. elapsed=2.00 s"),
    )
    sizes: list[int] = []
    report = analyze_stream(io.BytesIO(data), on_bytes=sizes.append)
    assert sum(sizes) == len(data) and report == analyze_bytes(data)


def test_a_path_is_read_and_closed(tmp_path: Path) -> None:
    data = log(
        NO_SPEC,
        sg("10:00:01", "", "Load weight begin."),
        sg("10:00:03", "", "Load weight end. elapsed=2.00 s"),
    )
    path = tmp_path / "boot.log"
    path.write_bytes(data)
    sizes: list[int] = []
    assert analyze_path(str(path), on_bytes=sizes.append) == analyze_bytes(data)
    assert sum(sizes) == len(data)
    assert analyze_path(str(path), stall_after_s=1.0, boot=1) == analyze_bytes(data, 1.0, 1)


# ------------------------------------------------------------------------------------------- real logs


def test_a_real_sglang_tp4_boot_has_every_phase_timed() -> None:
    # SGLang 0.4 serving QwQ-32B on 4 GPUs; the figures were checked against the log's records by hand
    report = analyze_path(str(REAL / "sglang-llms-in-clouds-qwq32b-tp4.log"))
    assert (report.framework, report.state, report.boots, report.warnings) == ("sglang", "ready", 1, ())
    assert table(report) == [
        ("init-distributed", None, None, "2025-03-08 12:29:11", "2025-03-08 12:29:13", 2.0, 4, None),
        ("load-weights", "target", None, "2025-03-08 12:29:13", "2025-03-08 12:29:21", 8.0, 4, None),
        ("kv-cache", "target", None, "2025-03-08 12:29:21", "2025-03-08 12:29:21", 0.0, 4, None),
        ("cuda-graph", "target", None, "2025-03-08 12:29:21", "2025-03-08 12:29:28", 7.25, 4, "TP1"),
        ("ready", None, None, "2025-03-08 12:29:28", "2025-03-08 12:29:33", 5.0, 1, None),
    ]
    assert (report.loader, report.loaders) == ("default", {"target": "default"})
    assert (report.first_timestamp, report.last_timestamp) == ("2025-03-08 12:29:04", "2025-03-08 12:29:47")
    assert report.summary == (
        "ready: the server reported ready 29.0 s after the first log record; longest phase: load-weights (target) 8.0 s"
        " [model /home/model/Qwen/QwQ-32B]"
    )


def test_a_real_vllm_boot_through_the_run_ai_streamer_reports_its_throughput() -> None:
    # vLLM V1 streaming from S3: "Overall time to stream 3.3 GiB of all files: 5.4s, 627.2 MiB/s"
    report = analyze_path(str(REAL / "vllm-cr7258-runai-s3.log"))
    assert (report.framework, report.state, report.warnings) == ("vllm", "ready", ())
    assert report.throughput_GiBps == 0.6125  # 627.2 / 1024
    assert (report.loader, report.loaders) == ("runai_streamer", {"target": "runai_streamer"})
    assert table(report) == [
        ("load-weights", "target", None, "06-02 11:02:18", "06-02 11:02:24", 6.11, 1, None),
        ("kv-cache", "target", None, "06-02 11:02:24", "06-02 11:03:18", 54.0, 1, None),
        ("cuda-graph", "target", None, "06-02 11:03:18", "06-02 11:03:55", 37.0, 1, None),
        # uvicorn's untimed "Application startup complete" follows the route list's 11:03:56 lines
        ("ready", None, None, "06-02 11:03:55", "06-02 11:03:56", 1.0, 1, None),
    ]


# ------------------------------------------------------------------------ bounds, styles and evidence


def test_a_bar_of_unknown_load_words_opens_a_phase_only_in_a_log_without_boot_records() -> None:
    fetching = "Fetching shards:  50%|#####     | 1/2 [00:01<00:01, 1.00it/s]"
    alone = analyze_bytes(log(sg("10:00:00", "", "hello"), fetching, sg("10:00:05", "", "x")))
    assert table(alone) == [("load-weights", "target", None, "2025-11-29 10:00:00", None, 5.0, 1, None)]
    assert bars(alone) == [("Fetching shards", "target", 1, 2)]
    assert alone.summary == (
        "loading target weights: 1/2 shards read, `Load weight end` (SGLang) or `Loading weights took` (vLLM) not yet "
        "logged - CUDA graph capture has not started"
    )
    after_records = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Init torch distributed begin."),
            sg("10:00:02", "", "Init torch distributed ends. elapsed=1.00 s"),
            fetching,
            sg("10:00:05", "", "x"),
        )
    )
    assert [p.name for p in after_records.phases] == ["init-distributed"]
    assert bars(after_records) == [("Fetching shards", None, 1, 2)]


def test_ranks_beyond_the_limit_are_booked_as_one_unknown_rank() -> None:
    lines = [NO_SPEC, *(sg("10:00:01", f"TP{n}", "Load weight begin.") for n in range(4100))]
    report = analyze_bytes(log(*lines))
    assert report.phases[0].ranks == 4097  # 4096 ranks and "?"
    assert report.summary == (
        "loading target weights: `Load weight end` not yet logged on 4096 of 4096 ranks - CUDA graph capture has not started"
    )


def test_without_boot_records_the_framework_is_the_style_most_records_were_written_in() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_line(vl("10:00:00", W0, "hello"))
    analyzer.feed_line(sg("10:00:01", "", "hello"))
    analyzer.feed_line(vl("10:00:02", W0, "hello again"))
    assert analyzer.framework() == "vllm"
    analyzer.feed_line(sg("10:00:03", "", "hello"))
    analyzer.feed_line(sg("10:00:04", "", "hello"))
    assert analyzer.framework() == "sglang"
    analyzer.feed_line("untimed hello")
    analyzer.feed_line("untimed hello")
    analyzer.feed_line("untimed hello")
    assert analyzer.framework() == "sglang"
    assert analyzer.report().summary == "starting: no rank has begun a boot phase yet"


def test_evidence_outweighs_the_style_of_the_records() -> None:
    analyzer = BootLogAnalyzer()
    for n in range(3):
        analyzer.feed_line(sg(f"10:00:0{n}", "", "hello"))
    analyzer.feed_line(vl("10:00:05", "", "Starting to load model /m..."))
    assert analyzer.framework() == "vllm"
    analyzer.feed_line(sg("10:00:06", "", "server_args=ServerArgs(tp_size=1)"))  # weight 5 against 2
    assert analyzer.framework() == "sglang"


def test_the_code_line_above_is_unknown_to_lines_fed_one_by_one() -> None:
    analyzer = BootLogAnalyzer()
    for line in (
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "    assert ok",
        "AssertionError",
    ):
        analyzer.feed_line(line)
    assert analyzer.report().error == "AssertionError"


def test_many_different_messages_are_each_read_for_what_they_say() -> None:
    lines = [NO_SPEC, *(sg("10:00:01", "", f"note {n}") for n in range(70))]
    lines += [sg("10:00:02", "", "Load weight begin."), *(sg("10:00:03", "", f"more {n}") for n in range(70))]
    lines += [sg("10:00:04", "", "Load weight end. elapsed=2.00 s")]
    analyzer = BootLogAnalyzer()
    for line in lines:
        analyzer.feed_line(line)
    assert table(analyzer.report()) == [
        ("load-weights", "target", None, "2025-11-29 10:00:02", "2025-11-29 10:00:04", 2.0, 1, None)
    ]


# -------------------------------------------------------------------------------------- physical lines

LINE_CAP = 64 << 10


def _server_args_of(length: int) -> str:
    """A server_args record ``length`` bytes long whose last key is dp_size=3."""
    head = sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, ")
    return head + "x" * (length - len(head) - len(", dp_size=3)")) + ", dp_size=3)"


@pytest.mark.parametrize(("length", "world"), [(LINE_CAP - 1, 6), (LINE_CAP + 1, 6), (LINE_CAP + 10, 2)])
def test_a_line_is_read_up_to_its_cap(length: int, world: int) -> None:
    line = _server_args_of(length)
    assert len(line.encode()) == length
    report = analyze_bytes(log(line, sg("10:00:03", "TP0", "Init torch distributed begin.")))
    silent = ", ".join(f"TP{n}" for n in range(1, world))
    assert report.warnings == (f"{silent} logged no boot record at all (1 of {world} ranks did)",)


def test_records_separated_by_a_carriage_return_are_each_read() -> None:
    joined = (
        sg("10:00:01", "", "Load weight begin.")
        + "\r"
        + sg("10:00:03", "", "Load weight end. elapsed=2.00 s")
    )
    report = analyze_bytes(log(NO_SPEC, joined))
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:03", 2.0, 1, None)
    ]


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    data = b"\n".join(
        [
            NO_SPEC.encode(),
            sg("10:00:01", "", "Load weight begin. ").encode() + b"\xff",
            b"caf\xff " + frame(1, 4).encode(),
            b"caf\xff " + frame(2, 4).encode(),
            sg("10:00:02", "", "Traceback (most recent call last):").encode(),
            b"    assert \xff ok",
            b"AssertionError",
            b"",
        ]
    )
    report = analyze_bytes(data)
    assert table(report) == [("load-weights", "target", None, "2025-11-29 10:00:01", None, 1.0, 1, None)]
    assert bars(report) == [("caf\ufffd Loading safetensors checkpoint shards", "target", 2, 4)]
    assert report.error == "AssertionError at `assert \ufffd ok`"


def test_a_graph_record_takes_over_the_phase_its_bar_opened_on_a_guess() -> None:
    capture = "Capturing batches (bs=8 avail_mem=7.05 GB):  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]"
    done = "Capturing batches (bs=4 avail_mem=7.00 GB): 100%|##########| 2/2 [00:02<00:00, 1.0it/s]"
    ranks = ("TP0", "TP1")
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm='EAGLE')"),
            *(sg("10:00:01", rank, "Load weight begin.") for rank in ranks),
            *(sg("10:00:02", rank, "Load weight end. elapsed=1.00 s") for rank in ranks),
            capture,  # opens a capture phase on rank 0 before any record says which
            *(sg("10:00:04", rank, "Capture target decode cuda graph begin.") for rank in ("TP1", "TP0")),
            done,
            sg("10:00:06", "TP1", "Capture target decode cuda graph end. Time elapsed: 2.00 s"),
            sg("10:00:07", "TP0", "Rank 0 scheduler is dead."),
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:02", 1.0, 2, None),
        ("cuda-graph", "target", "decode", "2025-11-29 10:00:04", None, 3.0, 2, "TP0"),
    ]
    assert bars(report) == [("Capturing batches", "target", 2, 2)]
    assert report.failure == FailureReport(
        "TP0", "cuda-graph", "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:07"
    )
    assert report.warnings == (
        "failed: TP0 at 2025-11-29 10:00:07 during cuda-graph (target decode): Rank 0 scheduler is dead.",
    )


def test_an_empty_line_above_a_bare_error_leaves_it_bare() -> None:
    report = analyze_bytes(
        log(
            "Traceback (most recent call last):",
            '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
            "    assert ok",
            "",
            "AssertionError",
        )
    )
    assert report.error == "AssertionError"


def test_two_variants_captured_at_once_are_paired_with_their_own_ends() -> None:
    lines = [
        sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE3')"),
        sg("10:00:01", "", "Capture target decode cuda graph begin."),
        sg("10:00:02", "", "Capture target prefill cuda graph begin."),
        sg("10:00:04", "", "Capture target prefill cuda graph end."),
    ]
    open_decode = analyze_bytes(log(*lines))
    assert open_decode.summary == (
        "target prefill CUDA graphs captured on 1 of 1 ranks in 2.0 s; nothing newer logged yet"
    )
    assert open_decode.warnings == (
        "cuda-graph (target decode): `Capture target decode CUDA graph end` never logged by the main process "
        "although the boot moved on",
    )
    report = analyze_bytes(log(*lines, sg("10:00:07", "", "Capture target decode cuda graph end.")))
    assert table(report) == [
        ("cuda-graph", "target", "decode", "2025-11-29 10:00:01", "2025-11-29 10:00:07", 6.0, 1, None),
        ("cuda-graph", "target", "prefill", "2025-11-29 10:00:02", "2025-11-29 10:00:04", 2.0, 1, None),
    ]


# ------------------------------------------------------------------------ where a failure happened


def test_a_log_that_starts_inside_a_traceback_still_names_what_failed() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            '  File "/sgl/srt/model_executor/model_runner.py", line 1, in load_model',
            "RuntimeError: x",
        )
    )
    assert report.failure == FailureReport(
        "", "load-weights", "target", None, "RuntimeError: x", "2025-11-29 10:00:01"
    )


def test_without_boot_records_every_engines_frames_are_read() -> None:
    report = analyze_bytes(
        log(
            "Traceback (most recent call last):",
            '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 3, in capture',
            "RuntimeError: boom",
        )
    )
    assert (report.framework, report.state) == ("unknown", "failed")
    # Nothing in the log speaks of a draft: the graphs being captured are the target's (#33 batch 4, cause A).
    assert report.failure == FailureReport("", "cuda-graph", "target", None, "RuntimeError: boom", None)
    assert report.summary == (
        "failed while capturing target CUDA graphs: the main process logged RuntimeError: boom"
    )


def test_an_sglang_traceback_is_read_with_sglangs_frames_only() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            "Traceback (most recent call last):",
            '  File "/v/worker/gpu_model_runner.py", line 3, in capture_model',  # a vLLM frame
            "RuntimeError: boom",
        )
    )
    assert report.failure == FailureReport(
        "", "load-weights", "target", None, "RuntimeError: boom", "2025-11-29 10:00:01"
    )


def test_a_failure_is_placed_in_the_phase_open_on_its_own_rank() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm=None)"),
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:01", "TP1", "Load weight begin."),
            sg("10:00:02", "TP1", "Load weight end. elapsed=1.00 s"),
            sg("10:00:02", "TP1", "KV Cache is allocated. #tokens: 1"),  # the boot's newest phase is TP1's
            sg("10:00:03", "TP0", "Rank 0 scheduler is dead."),
        )
    )
    assert report.failure == FailureReport(
        "TP0", "load-weights", "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:03"
    )


def test_of_two_phases_open_on_a_rank_the_newer_one_failed() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "KV Cache is allocated. #tokens: 1"),
            sg("10:00:03", "TP0", "Rank 0 scheduler is dead."),
        )
    )
    assert report.failure == FailureReport(
        "TP0", "kv-cache", "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:03"
    )
    assert (
        report.summary == "failed while allocating the target KV cache: TP0 logged Rank 0 scheduler is dead."
    )


def test_a_request_error_after_ready_on_a_rank_with_an_unended_phase_keeps_the_server_ready() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Capture cuda graph begin."),
            sg("10:00:05", "", "The server is fired up and ready to roll!"),
            sg("10:00:06", "TP0", "Traceback (most recent call last):"),
            sg("10:00:06", "TP0", "ValueError: bad request"),
        )
    )
    assert (report.state, report.failure) == ("ready", None)
    assert report.warnings == (
        "error logged by TP0 at 2025-11-29 10:00:06 during cuda-graph (target) (after the server was ready): "
        "ValueError: bad request",
    )
    assert table(report)[0] == ("cuda-graph", "target", None, "2025-11-29 10:00:01", None, 4.0, 1, None)


def test_a_bar_of_no_phase_can_stall_too() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "hello"),
            "Processing items:  50%|#####     | 1/2 [00:01<00:01, 1.00it/s]",
            sg("10:03:00", "", "x"),
        )
    )
    assert report.phases == ()
    assert report.warnings == (
        "stalled: 'Processing items' (unknown model) has been at 1/2 since 2025-11-29 10:00:00 while the log "
        "went on to 2025-11-29 10:03:00 (3m00s without progress)",
        UNKNOWN_ENGINE_WARNING,  # untagged `[date]` records name no engine
    )


# ------------------------------------------------------------------- frames of several bars on one line


def _fed_line_by_line(*lines: str) -> BootReport:
    analyzer = BootLogAnalyzer()
    for line in lines:
        analyzer.feed_line(line)
    return analyzer.report()


CAPTURE = "Capturing batches"


def _capture(done: int, total: int) -> str:
    return f"{CAPTURE} (bs={done}):  {100 * done // total:3d}%|##  | {done}/{total} [00:01<00:01, 1.0it/s]"


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        # a count that went down is a new bar, even when the next frame goes past the first one's count
        ([frame(3, 4), frame(1, 4), frame(4, 4)], [(BAR, "target", 3, 4), (BAR, "target", 4, 4)]),
        # another total is another bar, even when the count goes up
        (
            [frame(1, 4), frame(2, 8), frame(3, 4)],
            [(BAR, "target", 1, 4), (BAR, "target", 2, 8), (BAR, "target", 3, 4)],
        ),
        # another description is another bar, even with the same total
        (
            [frame(1, 4), _capture(2, 4), frame(3, 4)],
            [(BAR, "target", 3, 4), (CAPTURE, "target", 2, 4)],
        ),
    ],
)
def test_frames_joined_on_one_line_read_as_frames_fed_one_by_one(
    frames: list[str], expected: list[tuple[object, ...]]
) -> None:
    head = [NO_SPEC, sg("10:00:01", "", "Load weight begin.")]
    joined = _fed_line_by_line(*head, "\r".join(frames), sg("10:00:10", "", "x"))
    one_by_one = _fed_line_by_line(*head, *frames, sg("10:00:10", "", "x"))
    assert bars(joined) == bars(one_by_one) == expected


def test_frames_of_two_ranks_on_one_line_each_go_to_their_ranks_phase() -> None:
    r0, r1 = "(VllmWorker rank=0 pid=10) ", "(VllmWorker rank=1 pid=11) "
    head = [
        vl(
            "10:00:00",
            "EngineCore_0 pid=5",
            "Initializing a V1 LLM engine (v0.10.2) with config: speculative_config={'method': 'eagle'}",
        ),
        vl("10:00:01", W0, "Starting to load model /m..."),
        vl("10:00:01", W1, "Starting to load model /m..."),
        vl("10:00:02", W1, "Loading weights took 1.00 seconds"),
        vl("10:00:02", W1, "Loading drafter model..."),
    ]
    line = "\r".join([r0 + frame(1, 4), r1 + frame(2, 4), r0 + frame(3, 4)])
    report = _fed_line_by_line(*head, line, vl("10:00:05", W0, "x"))
    assert bars(report) == [(BAR, "target", 3, 4), (BAR, "draft", 2, 4)]


# ------------------------------------------------------------------ what the traceback's frames tell


def test_a_draft_frame_after_the_load_ended_names_the_draft_and_its_step() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            sg("10:00:02", "", "Load weight end. elapsed=1.00 s"),
            "Traceback (most recent call last):",
            '  File "/sgl/srt/speculative/eagle_worker.py", line 3, in __init__',
            "RuntimeError: boom",
        )
    )
    assert report.failure == FailureReport(
        "", None, "draft", "draft worker init", "RuntimeError: boom", "2025-11-29 10:00:02"
    )
    assert report.summary == "failed during draft worker init: the main process logged RuntimeError: boom"


def test_a_phase_frame_and_a_draft_frame_name_the_drafts_phase() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE')"),
            sg("10:00:01", "", "Load weight begin."),
            "Traceback (most recent call last):",
            '  File "/sgl/srt/speculative/eagle_worker.py", line 3, in __init__',
            '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 3, in capture',
            "RuntimeError: boom",
        )
    )
    assert report.failure == FailureReport(
        "", "cuda-graph", "draft", "draft worker init", "RuntimeError: boom", "2025-11-29 10:00:01"
    )


@pytest.mark.parametrize(
    ("frame_text", "phase", "model"),
    [
        ("in load_model", "load-weights", "target"),
        ("in init_memory_pool", "kv-cache", "target"),
        ("cuda_graph_runner.py", "cuda-graph", "target"),
        ("init_torch_distributed", "init-distributed", None),  # no model's phase
    ],
)
def test_without_speculation_the_phase_a_frame_names_is_the_targets(
    frame_text: str, phase: str, model: str | None
) -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Init torch distributed begin."),
            "Traceback (most recent call last):",
            f'  File "/sgl/srt/x.py", line 3, {frame_text}',
            "RuntimeError: boom",
        )
    )
    assert report.failure == FailureReport(
        "", phase, model, None, "RuntimeError: boom", "2025-11-29 10:00:01"
    )


def test_a_death_is_fatal_even_when_its_rank_logs_more() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "Rank 0 scheduler is dead."),
            sg("10:00:03", "TP0", "Load weight end. elapsed=2.00 s"),
        )
    )
    assert report.failure == FailureReport(
        "TP0", "load-weights", "target", None, "Rank 0 scheduler is dead.", "2025-11-29 10:00:02"
    )


def test_an_error_record_of_one_rank_is_not_fatal_once_another_rank_moves_on() -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:01", W1, "Starting to load model /m..."),
            vl("10:00:02", W1, "something bad", level="ERROR"),
            vl("10:00:03", W0, "Loading weights took 2.00 seconds"),
        )
    )
    assert (report.state, report.failure) == ("load-weights", None)
    assert report.warnings == (
        "error logged by rank1 at 11-29 10:00:02 during load-weights (target) (the boot went on): something bad",
    )


def test_a_traceback_from_a_rank_with_no_boot_record_is_survived_when_the_boot_moves_on() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP3", "Traceback (most recent call last):"),
            sg("10:00:02", "TP3", "ValueError: x"),
            sg("10:00:03", "TP0", "Load weight end. elapsed=2.00 s"),
        )
    )
    assert (report.state, report.failure) == ("load-weights", None)
    assert report.warnings == (
        "error logged by TP3 at 2025-11-29 10:00:02 during load-weights (target) (the boot went on): ValueError: x",
    )


# ------------------------------------------------------------------------------- streams and paths


def test_a_path_that_fails_while_read_is_named_with_the_systems_reason() -> None:
    with pytest.raises(LogInputError) as caught:
        analyze_path("/proc/self/mem")  # opens, then every read at offset 0 fails with EIO
    assert str(caught.value) == "/proc/self/mem: Input/output error"


@pytest.mark.parametrize(
    ("error", "name", "message"),
    [
        (OSError(5, "Input/output error"), "boot.log", "boot.log: Input/output error"),
        (OSError("no errno, only words"), None, "-: no errno, only words"),
    ],
)
def test_a_stream_that_fails_to_read_is_named(error: OSError, name: str | None, message: str) -> None:
    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: object) -> int:
            raise error

    kwargs = {"name": name} if name else {}
    with pytest.raises(LogInputError) as caught:
        analyze_stream(Broken(), **kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_standard_input_is_read_and_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    data = log(*_boot("10"), *_boot("11"))
    stdin = io.BytesIO(data)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stdin))
    report = analyze_path("-", boot=1)
    assert not stdin.closed
    assert (report.boots, report.boot, report.phases[0].start) == (2, 1, "2025-11-29 10:00:03")


def test_a_boot_is_picked_from_a_stream_and_a_file(tmp_path: Path) -> None:
    data = log(*_boot("10"), *_boot("11"))
    path = tmp_path / "boot.log"
    path.write_bytes(data)
    for report in (analyze_stream(io.BytesIO(data), boot=1), analyze_path(str(path), boot=1)):
        assert (report.boots, report.boot, report.phases[0].start) == (2, 1, "2025-11-29 10:00:03")
    assert analyze_path(str(path)).boot == 2


# ---------------------------------------------------------------------- which phase a bar belongs to

SPEC_TP2 = sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm='EAGLE')")
SPEC_TP1 = sg("10:00:00", "", "server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE')")


def test_a_ranks_first_graphs_are_the_drafts_when_only_the_draft_was_loaded_anywhere() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2,
            sg("10:00:01", "TP0", "Init torch distributed begin."),
            sg("10:00:02", "TP0", "Init torch distributed ends. elapsed=1.00 s"),
            sg("10:00:05", "TP0", "Load weight end. elapsed=3.00 s, type=LlamaForCausalLMEagle3"),
            sg("10:00:06", "TP1", "Capture cuda graph begin."),  # TP1 itself logged no load
        )
    )
    assert [(p.name, p.model) for p in report.phases] == [
        ("init-distributed", None),
        ("load-weights", "draft"),
        ("cuda-graph", "draft"),
    ]
    assert (
        report.summary
        == "capturing draft CUDA graphs: `Capture cuda graph end` not yet logged on 2 of 2 ranks"
    )


def test_bars_drawn_in_turn_each_keep_their_own_progress() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            frame(1, 4),
            sg("10:00:02", "", "a"),
            _capture(2, 4),
            sg("10:00:03", "", "b"),
            frame(2, 4),
            sg("10:00:04", "", "c"),
        )
    )
    assert bars(report) == [(BAR, "target", 2, 4), (CAPTURE, "target", 2, 4)]


def test_a_bar_redrawn_without_progress_has_not_moved() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            frame(5, 10),
            sg("10:02:00", "", "a"),
            frame(5, 10),
            sg("10:02:30", "", "b"),
        )
    )
    assert report.warnings == (
        f"stalled: '{BAR}' (target) has been at 5/10 since 2025-11-29 10:00:01 while the log went on to "
        "2025-11-29 10:02:30 (2m29s without progress)",
    )


def test_an_untagged_bar_in_a_log_led_by_the_untagged_process_follows_its_open_phase() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2,
            sg("10:00:01", "", "Load weight begin."),
            sg("10:00:01", "TP1", "Load weight begin."),
            sg("10:00:02", "TP1", "Load weight end. elapsed=1.00 s"),
            sg("10:00:02", "TP1", "Load weight begin."),  # TP1's draft: the newest load
            frame(1, 4),
            sg("10:00:05", "", "x"),
        )
    )
    assert bars(report) == [(BAR, "target", 1, 4)]


def test_a_frame_drawn_after_its_phase_ended_still_belongs_to_it() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:05", "TP0", "Load weight end. elapsed=4.00 s"),
            frame(4, 4),
            sg("10:00:06", "TP0", "x"),
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:05", 4.0, 1, None)
    ]
    assert bars(report) == [(BAR, "target", 4, 4)]


def test_of_two_captures_open_on_the_rank_the_newer_one_draws_the_bar() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP1,
            sg("10:00:01", "", "Capture target prefill cuda graph begin."),
            sg("10:00:02", "", "Capture target decode cuda graph begin."),
            _capture(1, 2),
            sg("10:00:05", "", "x"),
        )
    )
    assert report.summary == (
        "capturing target decode CUDA graphs: 1/2 done, `Capture target decode CUDA graph end` not yet logged"
    )


def test_a_bar_opens_its_phase_on_global_rank_0() -> None:
    ranks = ("TP0", "TP1")
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm=None)"),
            *(sg("10:00:01", rank, "Init torch distributed begin.") for rank in ranks),
            *(sg("10:00:02", rank, "Init torch distributed ends. elapsed=1.00 s") for rank in ranks),
            frame(1, 4),
            sg("10:00:05", "", "x"),
        )
    )
    assert report.summary == (
        "loading target weights: 1/4 shards read, `Load weight end` not yet logged on 2 of 2 ranks - "
        "CUDA graph capture has not started"
    )
    assert report.phases[1] == PhaseReport(
        "load-weights", "target", None, "2025-11-29 10:00:02", None, 3.0, 1, None
    )


def test_a_load_bar_after_the_targets_graphs_opens_the_drafts_load() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP1,
            sg("10:00:01", "", "Capture cuda graph begin."),
            sg("10:00:02", "", "Capture cuda graph end."),
            frame(1, 4),
            sg("10:00:05", "", "x"),
        )
    )
    assert [(p.name, p.model, p.end) for p in report.phases] == [
        ("cuda-graph", "target", "2025-11-29 10:00:02"),
        ("load-weights", "draft", None),
    ]
    assert bars(report) == [(BAR, "draft", 1, 4)]


@pytest.mark.parametrize(("distinct", "new_entry"), [(257, False), (258, True)])
def test_bars_are_remembered_up_to_their_bound(distinct: int, new_entry: bool) -> None:
    def step(n: int, done: int) -> str:
        return f"Step {n}:  {50 * done}%|#  | {done}/2 [00:01<00:01, 1.0it/s]"

    lines = [sg("10:00:00", "", "hello")]
    for n in range(distinct):
        lines += [step(n, 1), sg("10:00:01", "", f"between {n}")]
    lines += [step(0, 2), sg("10:00:02", "", "end")]
    report = analyze_bytes(log(*lines))
    # the first bar's next frame updates its entry, unless more bars than the bound came in between
    last = bars(report)[-1]
    assert last == (("Step 0", None, 2, 2) if new_entry else (f"Step {distinct - 1}", None, 1, 2))
    assert len(report.progress) == 64


# ------------------------------------------------------------------- begins, ends and whose they are


def test_speculation_off_is_read_even_when_the_record_opens_with_it() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "speculative_algorithm=None, tp_size=1 ServerArgs(x=1)"),
            sg("10:00:01", "", "Load weight begin."),
            sg("10:00:02", "", "Load weight end. elapsed=1.00 s"),
            sg(
                "10:00:03", "", "Load weight begin."
            ),  # without speculation a second load is the target's again
        )
    )
    assert [(p.name, p.model, p.start) for p in report.phases] == [
        ("load-weights", "target", "2025-11-29 10:00:03")
    ]


def test_an_end_without_begin_on_one_rank_leaves_anothers_open_phase_alone() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:03", "TP1", "Load weight end. elapsed=2.00 s, type=LlamaForCausalLMEagle3"),
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", None, 2.0, 1, None),
        ("load-weights", "draft", None, "2025-11-29 10:00:01", "2025-11-29 10:00:03", 2.0, 1, None),
    ]


def test_only_the_first_kv_cache_size_line_ends_the_pool() -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:05", W0, "Loading weights took 4.00 seconds"),
            vl("10:00:09", "", "GPU KV cache size: 1,234 tokens"),
            vl("10:00:20", "", "GPU KV cache size: 1,234 tokens"),
        )
    )
    assert table(report)[1] == ("kv-cache", "target", None, "11-29 10:00:05", "11-29 10:00:09", 4.0, 1, None)


def test_graphs_ended_without_a_begin_make_the_next_load_the_drafts() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP1,
            sg("10:00:03", "", "Capture cuda graph end. Time elapsed: 2.00 s"),
            sg("10:00:04", "", "Load weight begin."),
        )
    )
    assert [(p.name, p.model, p.start, p.end) for p in report.phases] == [
        ("cuda-graph", "target", "2025-11-29 10:00:01", "2025-11-29 10:00:03"),
        ("load-weights", "draft", "2025-11-29 10:00:04", None),
    ]


def test_a_phase_first_seen_by_its_end_is_still_named_by_its_end_record() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:00", "", "server_args=ServerArgs(tp_size=2, speculative_algorithm=None)"),
            sg("10:00:03", "TP1", "Load weight end. elapsed=2.00 s"),
            sg("10:00:04", "TP0", "Load weight begin."),
        )
    )
    assert report.summary == (
        "loading target weights: `Load weight end` not yet logged on 1 of 2 ranks - CUDA graph capture has not started"
    )


@pytest.mark.parametrize(
    "tp1_before",
    [
        # TP1 allocated a pool before any load was logged: that pool does not make it a target loader
        [sg("10:00:01", "TP1", "Memory pool end. avail mem=1 GB")],
        # TP1 loaded only the draft, though TP0 loaded the target
        [
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "Load weight end. elapsed=1.00 s"),
        ],
    ],
)
def test_a_ranks_first_graphs_follow_the_models_it_loaded(tp1_before: list[str]) -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2,
            *tp1_before,
            sg(
                "10:00:03",
                "TP1" if len(tp1_before) == 2 else "TP0",
                "Load weight end. elapsed=2.00 s, type=LlamaForCausalLMEagle3",
            ),
            sg("10:00:04", "TP1", "Capture cuda graph begin."),
        )
    )
    assert (report.phases[-1].name, report.phases[-1].model) == ("cuda-graph", "draft")


# -------------------------------------------------------------------------- how blocks are scanned


def test_a_record_ending_in_a_percent_sign_is_read_once() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "", "Load weight begin."),
            sg("10:00:02", "", "Decode batch. token usage: 50%"),
            sg("10:00:03", "", "Load weight end. elapsed=2.00 s"),
        )
    )
    assert table(report) == [
        ("load-weights", "target", None, "2025-11-29 10:00:01", "2025-11-29 10:00:03", 2.0, 1, None)
    ]


@pytest.mark.parametrize("desc", [BAR, f"{BAR} (0 failed)"])
def test_a_bar_frame_takes_the_time_of_the_last_timed_line_above_it(desc: str) -> None:
    bar = f"{desc}:  50% Completed | 2/4 [00:01<00:01, 1.00it/s]"
    head = [NO_SPEC, sg("10:00:01", "", "Load weight begin.")]
    tail = [sg("10:00:30", "", "hello"), bar, sg("10:03:00", "", "x")]
    in_one = analyze_bytes(log(*head, *tail))
    analyzer = BootLogAnalyzer()
    analyzer.feed_block(log(*head))
    analyzer.feed_block(log(*tail))  # the timed line opens the second block
    for report in (in_one, analyzer.report()):
        assert report.warnings == (
            f"stalled: '{BAR}' (target) has been at 2/4 since 2025-11-29 10:00:30 while the log went on to "
            "2025-11-29 10:03:00 (2m30s without progress)",
        )


def test_frames_of_a_traceback_whose_start_is_missing_are_not_a_failure_unless_they_name_a_phase() -> None:
    lines = [NO_SPEC, sg("10:00:01", "", "Load weight begin.")]
    unknown = analyze_bytes(log(*lines, '  File "/x/y.py", line 1, in f'))
    assert (unknown.state, unknown.failure) == ("load-weights", None)
    known = analyze_bytes(log(*lines, '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 1, in f'))
    assert known.failure == FailureReport(
        "",
        "cuda-graph",
        "target",
        None,
        "a traceback whose start is not in the log (the log ends before its error line)",
        "2025-11-29 10:00:01",
    )


# -------------------------------------------------------------------------- evidence, order, bounds


def test_the_log_clock_keeps_the_first_stamp_of_an_instant() -> None:
    report = analyze_bytes(
        log(
            sg("10:00:01.000", "", "Load weight begin."),
            sg("10:00:01", "", "Load weight end. elapsed=0.00 s"),
        )
    )
    assert report.last_timestamp == "2025-11-29 10:00:01.000"


def test_a_failed_warmup_is_fatal_even_when_the_process_logs_more() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:09", "", "Initialization failed. warmup error: Traceback ..."),
            sg("10:00:10", "", "Capture cuda graph begin."),
        )
    )
    assert report.state == "failed"
    assert report.failure is not None and report.failure.step == "the warmup request"


def test_evidence_adds_up_over_records() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_line(vl("10:00:01", W0, "Filesystem type for checkpoints: nfs4."))
    analyzer.feed_line(vl("10:00:02", W0, "Prefetching checkpoint files into page cache started"))
    analyzer.feed_line(vl("10:00:03", "", "EngineCore failed to start."))
    analyzer.feed_line(sg("10:00:04", "", "server_args=ServerArgs(tp_size=1)"))  # 5 against 2 + 2 + 2
    assert analyzer.framework() == "vllm"


def test_one_record_is_evidence_enough() -> None:
    analyzer = BootLogAnalyzer()
    analyzer.feed_line("Load weight begin.")  # untimed: no style counted, only the record's weight of 1
    assert analyzer.framework() == "sglang"


def test_a_world_of_exactly_the_rank_limit_is_still_named() -> None:
    report = _first_rank_only("server_args=ServerArgs(tp_size=4096)")
    assert report.warnings == (
        "TP1, TP2, TP3, TP4, TP5, TP6, TP7, TP8 and 4087 more logged no boot record at all (1 of 4096 ranks did)",
    )


def test_missing_ranks_are_listed_in_numeric_order() -> None:
    report = _first_rank_only("server_args=ServerArgs(tp_size=12)")
    assert report.warnings == (
        "TP1, TP2, TP3, TP4, TP5, TP6, TP7, TP8 and 3 more logged no boot record at all (1 of 12 ranks did)",
    )


def test_a_failure_with_a_step_is_preferred_to_a_bare_death() -> None:
    report = analyze_bytes(
        log(
            NO_SPEC,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:02", "TP0", "Rank 0 scheduler is dead."),
            sg("10:00:03", "", "Initialization failed. warmup error"),
        )
    )
    assert report.failure is not None
    assert (report.failure.step, report.failure.error) == (
        "the warmup request",
        "Initialization failed. warmup error",
    )


@pytest.mark.parametrize("level", ["ERROR", "CRITICAL"])
def test_a_python_error_is_preferred_to_an_error_record(level: str) -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:02", W0, "something bad", level=level),
            vl("10:00:03", W1, "Traceback (most recent call last):"),
            vl("10:00:03", W1, "ValueError: x", level="ERROR"),
        )
    )
    assert report.failure is not None and (report.failure.rank, report.failure.error) == (
        "rank1",
        "ValueError: x",
    )
    alone = analyze_bytes(
        log(vl("10:00:01", W0, "Starting to load model /m..."), vl("10:00:02", W0, "bad", level=level))
    )
    assert alone.failure == FailureReport("rank0", "load-weights", "target", None, "bad", "11-29 10:00:02")


def test_without_global_rank_0_an_untagged_bar_follows_the_newest_phase_of_its_kind() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2.replace("tp_size=2", "tp_size=3"),
            sg("10:00:01", "TP1", "Load weight begin."),
            sg("10:00:01", "TP2", "Load weight begin."),
            sg("10:00:02", "TP2", "Load weight end. elapsed=1.00 s"),
            sg("10:00:02", "TP2", "Load weight begin."),
            frame(1, 4),
            sg("10:00:05", "", "x"),
        )
    )
    assert bars(report) == [(BAR, "draft", 1, 4)]


def test_a_bar_drawn_before_any_timestamp_is_never_stalled() -> None:
    report = analyze_bytes(log(frame(1, 4), sg("10:05:00", "", "x")))
    assert report.warnings == (UNKNOWN_ENGINE_WARNING,) and bars(report) == [(BAR, "target", 1, 4)]


def test_a_second_begin_before_the_first_end_keeps_the_phase_other_ranks_share() -> None:
    report = analyze_bytes(
        log(
            SPEC_TP2,
            sg("10:00:01", "TP0", "Load weight begin."),
            sg("10:00:01", "TP1", "Load weight begin."),
            sg("10:00:02", "TP0", "Load weight begin."),  # TP0's second load: the draft's
        )
    )
    assert [(p.name, p.model, p.ranks) for p in report.phases] == [
        ("load-weights", "target", 2),
        ("load-weights", "draft", 1),
    ]


def test_the_restart_warning_comes_first() -> None:
    report = analyze_bytes(log(*_boot("10"), *_boot("11"), sg("11:00:09", "", "Rank 0 scheduler is dead.")))
    assert (
        report.warnings[0]
        == "the log holds 2 boots; this report covers the last one (--boot N picks another)"
    )
    assert report.warnings[1].startswith("failed: the main process at 2025-11-29 11:00:09")


def test_a_vllm_phase_a_rank_never_ended_is_named_by_vllms_end_record() -> None:
    report = analyze_bytes(
        log(
            vl("10:00:01", W0, "Starting to load model /m..."),
            vl("10:00:01", W1, "Starting to load model /m..."),
            vl("10:00:05", W0, "Loading weights took 4.00 seconds"),
            vl("10:00:09", "", "GPU KV cache size: 1,234 tokens"),
        )
    )
    assert report.warnings == (
        "load-weights (target): `Loading weights took` never logged by rank1 although the boot moved on",
    )


@pytest.mark.parametrize(("deaths", "shown_extra"), [(40, None), (41, 1), (45, 5)])
def test_warnings_are_capped_at_forty(deaths: int, shown_extra: int | None) -> None:
    lines = [sg("10:00:01", f"TP{n}", f"Rank {n} scheduler is dead.") for n in range(deaths)]
    report = analyze_bytes(log(*lines))
    if shown_extra is None:
        assert len(report.warnings) == 40 and report.warnings[-1].startswith("failed: TP39 ")
    else:
        assert len(report.warnings) == 41
        assert report.warnings[-1] == f"... and {shown_extra} more warnings"
        assert report.warnings[-2].startswith("failed: TP39 ")


def test_what_a_log_does_not_say_is_none() -> None:
    report = analyze_bytes(log(NO_SPEC, sg("10:00:01", "", "Load weight begin.")))
    assert (report.filesystem, report.prefetch, report.loader, report.throughput_GiBps) == (
        None,
        None,
        None,
        None,
    )


def test_a_boot_is_picked_from_bytes_too() -> None:
    report = analyze_bytes(log(*_boot("10"), *_boot("11")), boot=1)
    assert (report.boots, report.boot, report.phases[0].start) == (2, 1, "2025-11-29 10:00:03")


def test_a_skipped_frame_is_applied_before_a_new_bar_and_a_record_may_precede_frames() -> None:
    joined = "\r".join([frame(1, 4), frame(2, 4), frame(1, 8)])
    report = _fed_line_by_line(NO_SPEC, sg("10:00:01", "", "Load weight begin."), joined)
    assert bars(report) == [(BAR, "target", 2, 4), (BAR, "target", 1, 8)]
    led = sg("10:00:02", "", "Decode batch.") + "\r" + "\r".join([frame(1, 4), frame(3, 4)])
    report = _fed_line_by_line(NO_SPEC, sg("10:00:01", "", "Load weight begin."), led)
    assert bars(report) == [(BAR, "target", 3, 4)]


def test_a_boot_of_bars_alone_does_not_take_the_next_servers_first_stamp() -> None:
    # GIVEN a paste of a vLLM worker's shard bars with no stamp of its own (vllm-vllm-27521's form), then an SGLang
    # server's start appended: a dated warning before its configuration
    bars = (
        "(Worker_DP0_TP0_EP0 pid=5015) ",
        "Loading safetensors checkpoint shards:  47% Completed | 29/62 [01:09<01:19,  2.40s/it]",
        "(Worker_DP0_TP0_EP0 pid=5015) ",
        "Loading safetensors checkpoint shards:  48% Completed | 30/62 [01:11<01:17,  2.42s/it]",
    )
    joined = log(
        *bars,
        "[2026-08-01 23:37:38] Attention backend not specified. Use fa3 backend by default.",
        "[2026-08-01 23:37:40] server_args=ServerArgs(model_path='m', tp_size=1)",
    )
    # WHEN the two are read together, and the bars alone
    first, alone = analyze_bytes(joined, boot=1), analyze_bytes(log(*bars))
    # THEN the first boot reads as the bars alone do: its load has no time, and the next server's stamps are not its
    assert [(p.name, p.start, p.seconds) for p in first.phases] == [("load-weights", None, None)]
    assert [(p.name, p.start, p.seconds) for p in alone.phases] == [("load-weights", None, None)]
    assert (first.first_timestamp, first.last_timestamp) == (None, None)
    assert analyze_bytes(joined).first_timestamp == "2026-08-01 23:37:40"
