"""The words of a dying process: found with str.find, then confirmed as whole words."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.failures import Failure, _read_frame, is_death, validation_cause
from ckptprof.bootlog.reading import ERROR_WORDS_READ_BY, FRAMES_READ_BY
from ckptprof.engines.log_rules import FrameRule


@pytest.mark.parametrize(
    ("message", "dies"),
    [
        ("Scheduler process is dead, exiting", True),
        ("received sigquit from child process", True),
        ("Killed", True),
        ("bash: line 1: 1234 Killed python -m sglang.launch_server", True),
        ("CUDA error (/src/flash_api.cpp:42): out of memory", True),
        ("Engine core initialization failed. See root cause above.", True),
        ("WorkerProc failed to start.", True),
        ("Fatal Python error: Segmentation fault", True),
        # The same letters inside longer names are not a death.
        ("server_args=ServerArgs(custom_sigquit_handler=None, log_level='info')", False),
        ("reason: OOMKilled (exit code 137)", False),
        ("the queue thisis deadline-bound", False),
        # A later whole-word hit counts even when the first hit was part of a name.
        ("custom_sigquit_handler=None ... got sigquit", True),
        ("OOMKilled once, then Killed again", True),
        ("Load weight end. type=LlamaForCausalLM", False),
    ],
)
def test_is_death_needs_the_whole_word(message: str, dies: bool) -> None:
    assert is_death(message) is dies


def test_a_ranks_own_failure_is_blamed_before_an_untagged_line_about_it() -> None:
    # GIVEN a paste that lost the worker tag of its first line, then the worker's traceback
    log = b"""WorkerProc failed to start.
(VllmWorker rank=3 pid=4867) ERROR 07-26 18:47:24 [multiproc_executor.py:511] Traceback (most recent call last):
(VllmWorker rank=3 pid=4867) ERROR 07-26 18:47:24 [multiproc_executor.py:511]   File "/x/vllm/v1/executor/multiproc_executor.py", line 485, in worker_main
"""
    failure = analyze_bytes(log).failure
    assert failure is not None and failure.rank == "rank3"


_LOAD_TRACEBACK = (
    b"Traceback (most recent call last):\n"
    b'  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/model_runner.py", line 9, in load_model\n'
    b'  File "/usr/lib/python3/site-packages/sglang/srt/model_loader/loader.py", line 9, in load_weights\n'
    b"RuntimeError: CUDA out of memory\n"
)


def test_a_phase_read_from_frames_alone_is_the_targets_when_nothing_speaks_of_a_draft() -> None:
    failure = analyze_bytes(_LOAD_TRACEBACK).failure
    assert failure is not None and (failure.phase, failure.model) == ("load-weights", "target")


_EAGLE_ARGS = b"[2025-08-19 21:19:00] server_args=ServerArgs(tp_size=1, speculative_algorithm='EAGLE')\n"


def test_a_phase_read_from_frames_cut_above_names_no_model_when_the_server_runs_a_draft() -> None:
    """GIVEN a server that runs a draft and a traceback whose start lies above the excerpt WHEN it is read THEN the
    load it died in is nobody's in particular: the frames that would name the draft's worker may be the ones cut."""
    cut = _LOAD_TRACEBACK.replace(b"Traceback (most recent call last):\n", b"")
    failure = analyze_bytes(_EAGLE_ARGS + cut).failure
    assert failure is not None and failure.phase == "load-weights" and failure.model is None


_SCHEDULER = (
    b'  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 221, in __init__\n'
)
_EAGLE_WORKER = (
    b'  File "/usr/lib/python3/site-packages/sglang/srt/speculative/eagle_worker.py", line 33, in __init__\n'
)
_POOL = (
    b'  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/model_runner.py", line 9, in init_memory_pool\n'
    b"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
)


def test_a_whole_traceback_with_no_draft_frame_is_the_targets_where_a_draft_runs() -> None:
    """GIVEN a server that runs a draft and a whole traceback (its start in the log) through the scheduler into the
    model runner's pool, with no frame of the speculative worker WHEN it is read THEN the pool that failed is the
    target's (batch 38: a NextN TP4 boot's target pool out of memory); through EAGLEWorker, the draft's."""
    start = b"Traceback (most recent call last):\n"
    target = analyze_bytes(_EAGLE_ARGS + start + _SCHEDULER + _POOL).failure
    draft = analyze_bytes(_EAGLE_ARGS + start + _SCHEDULER + _EAGLE_WORKER + _POOL).failure
    assert target is not None and (target.phase, target.model) == ("kv-cache", "target")
    assert draft is not None and (draft.phase, draft.model) == ("kv-cache", "draft")


def test_vllms_shared_steps_name_no_model_from_a_whole_traceback() -> None:
    """GIVEN a vLLM server with a drafter and a whole traceback in the KV cache's step, which the drafter shares with
    the target (one model runner sizes both) WHEN it is read THEN no model is named: only the load runs apart."""
    args = b"INFO 05-01 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.20.0) with config: model='m', speculative_config=SpeculativeConfig(method='mtp')\n"
    traceback = (
        b"Traceback (most recent call last):\n"
        b'  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 9, in _initialize_kv_caches\n'
        b"RuntimeError: boom\n"
    )
    failure = analyze_bytes(args + traceback).failure
    assert failure is not None and failure.phase == "kv-cache" and failure.model is None


@pytest.mark.parametrize(
    "named",
    [
        b"Error executing method 'load_model'. This might cause deadlock in distributed execution.",
        b"Exception in worker VllmWorkerProcess while processing method load_model.",
    ],
)
def test_the_method_a_worker_names_failing_gives_the_phase_of_its_traceback(named: bytes) -> None:
    tag = b"(RayWorkerWrapper pid=91936, ip=10.0.0.5) ERROR 03-11 15:24:48 [worker_base.py:620] "
    repeated = b" [repeated 4x across cluster]\n"
    log = (
        tag + named + repeated
        + tag + b"Traceback (most recent call last):" + repeated
        + tag + b'  File "/site-packages/vllm/worker/worker_base.py", line 612, in execute_method' + repeated
    )  # fmt: skip
    report = analyze_bytes(log)
    assert report.failure is not None and report.failure.phase == "load-weights"
    # Ray's deduplication marker is not part of what the worker said.
    assert "repeated" not in (report.error or "")


def test_a_traceback_cut_below_its_load_frame_names_the_load_by_the_layers_being_built() -> None:
    tail = (
        b'  File "/site-packages/vllm/model_executor/layers/linear.py", line 398, in __init__\n'
        b'  File "/site-packages/vllm/model_executor/layers/linear.py", line 178, in create_weights\n'
        b'  File "/site-packages/torch/utils/_device.py", line 104, in __torch_function__\n'
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.\n"
    )
    failure = analyze_bytes(tail).failure
    assert failure is not None and failure.phase == "load-weights"


CHAINED = (
    b"[2026-02-26 04:55:25] INFO core.py:501: import done\n"
    b"Traceback (most recent call last):\n"
    b'  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line 1048\n'
    b"KeyError: 'glm_moe_dsa'\n"
    b"\n"
    b"%s\n"
    b"\n"
    b"Traceback (most recent call last):\n"
    b'  File "/sgl-workspace/sglang/python/sglang/srt/server_args.py", line 5063, in get_model_config\n'
    b"ValueError: The checkpoint has model type `glm_moe_dsa` but Transformers does not recognize it.\n"
)


def test_an_error_raised_while_handling_another_is_the_one_reported() -> None:
    """Python's `During handling of the above exception, another exception occurred`: the first error (a lookup's
    KeyError) was being handled when the second ended the process, and the second says what was wrong (#33)."""
    report = analyze_bytes(CHAINED % b"During handling of the above exception, another exception occurred:")
    assert report.error is not None and report.error.startswith("ValueError: The checkpoint has model type")


def test_a_direct_cause_stays_the_error_reported() -> None:
    """`The above exception was the direct cause of the following exception`: the root cause is printed first
    and is what the failure was (a missing module under a wrapper's error)."""
    report = analyze_bytes(CHAINED % b"The above exception was the direct cause of the following exception:")
    assert report.error == "KeyError: 'glm_moe_dsa'"


ANNOUNCED = (
    b"(VllmWorker rank=1 pid=17) INFO 05-15 17:46:31 [gpu_model_runner.py:1626] Graph capturing finished in 78 secs\n"
    b"(VllmWorker rank=1 pid=17) ERROR 05-15 17:46:32 [multiproc_executor.py:380] WorkerProc hit an exception: %s\n"
    b"(VllmWorker rank=1 pid=17) ERROR 05-15 17:46:32 [multiproc_executor.py:380] Traceback (most recent call last):\n"
    b'(VllmWorker rank=1 pid=17) ERROR 05-15 17:46:32 [multiproc_executor.py:380]   File "/x/vllm/v1/worker/a.py"\n'
)


def test_a_traceback_cut_before_its_error_line_reads_with_the_error_its_rank_announced_it_with() -> None:
    """GIVEN a rank's error record (`WorkerProc hit an exception`) and then its traceback, cut before the error
    line THEN the failure's error is the announcement, not `Traceback (most recent call last):` (#33)."""
    report = analyze_bytes(ANNOUNCED)
    assert report.failure is not None and report.failure.rank == "rank1"
    assert report.error == "WorkerProc hit an exception: %s"
    assert report.failure.error == (
        "WorkerProc hit an exception: %s (the log ends before its traceback's error line)"
    )


def test_an_error_record_of_another_rank_does_not_announce_a_cut_traceback() -> None:
    other = ANNOUNCED.replace(
        b"rank=1 pid=17) ERROR 05-15 17:46:32 [multiproc_executor.py:380] Worker",
        b"rank=0 pid=16) ERROR 05-15 17:46:32 [multiproc_executor.py:380] Worker",
    )
    report = analyze_bytes(other)
    assert report.failure is not None
    assert report.failure.error == "Traceback (most recent call last): (the log ends before its error line)"


def test_a_traceback_of_pythons_resource_tracker_is_not_the_servers_failure() -> None:
    """GIVEN a boot capturing graphs, then at exit the traceback of multiprocessing's resource tracker (a helper
    process cleaning shared memory) THEN the boot did not fail: it is still where its records left it, and the
    error is a warning that says whose it was (#33). The same traceback through a server frame is a failure."""
    boot = b"[22:30:40 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    tracker = (
        b"Traceback (most recent call last):\n"
        b'  File "/env/lib/python3.11/multiprocessing/resource_tracker.py", line 239, in main\n'
        b"    cache[rtype].remove(name)\n"
        b"KeyError: '/mp-dv7az532'\n"
    )
    report = analyze_bytes(boot + tracker)
    assert (report.state, report.failure) == ("cuda-graph", None)
    assert report.warnings[0].endswith(
        "(by Python's resource tracker, not the server): KeyError: '/mp-dv7az532'"
    )
    server = tracker.replace(b"multiprocessing/resource_tracker.py", b"sglang/srt/managers/scheduler.py")
    assert analyze_bytes(boot + server).state == "failed"


def test_the_failures_warning_names_the_step_its_frames_name() -> None:
    """GIVEN a V0 boot whose records reached the load (no end line) and whose traceback's frames are the memory profile
    (batch 37's gemma crash) WHEN it is read THEN the warning places the failure where the report does: in the KV
    cache's step, not "during load-weights"."""
    log = b"""INFO 11-15 04:16:07 model_runner.py:1072] Starting to load model google/gemma-2-27b-it...
[rank0]: Traceback (most recent call last):
[rank0]:   File "/x/vllm/worker/worker.py", line 202, in determine_num_available_blocks
[rank0]:     self.model_runner.profile_run()
[rank0]: ValueError: Please use Flashinfer backend for models with logits_soft_cap
"""
    report = analyze_bytes(log)
    assert report.failure is not None and report.failure.phase == "kv-cache"
    assert report.warnings[0].startswith("failed: rank0 at 11-15 04:16:07 during kv-cache: ValueError"), (
        report.warnings
    )


def test_a_bar_printed_after_the_traceback_of_its_step_is_that_steps() -> None:
    """GIVEN a rank's traceback that died loading the draft (its frames pass through EAGLEWorker), then the load's 0/1
    bar printed after it (stderr pasted after stdout: SafeAILab/EAGLE#130) WHEN it is read THEN the bar is the draft's
    load and no sign that the rank went on: the rank's traceback is the failure, not the launcher's sigquit line."""
    log = (
        b"[2025-01-20 19:10:07] Received sigquit from a child proces. It usually means the child failed.\n"
        b"[2025-01-20 19:10:07 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        + _SCHEDULER
        + _EAGLE_WORKER
        + b'  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/model_runner.py", line 9, in load_model\n'
        b"KeyError: 'layers.0.self_attn.qkv_proj.weight'\n"
        b"\n"
        b"Loading pt checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]\n"
    )
    report = analyze_bytes(log)
    assert [(phase.name, phase.model) for phase in report.phases] == [("load-weights", "draft")]
    assert report.failure is not None
    assert (report.failure.rank, report.failure.phase, report.failure.model) == (
        "TP0",
        "load-weights",
        "draft",
    )


def test_pythons_fatal_error_is_the_workers_death() -> None:
    """GIVEN a Ray worker that loaded its weights, then printed its native stack and Python's last words as a signal
    killed it (ROCm/ROCm#5656) WHEN the log is read THEN the boot failed there, on that worker."""
    tag = b"(EngineCore_DP0 pid=742) (RayWorkerWrapper pid=233, ip=10.20.1.125) "
    log = (
        b"INFO 11-12 11:11:50 [gpu_model_runner.py:1] Starting to load model m...\n"
        + tag
        + b"INFO 11-12 11:12:10 [gpu_model_runner.py:1] Starting to load model m...\n"
        + tag
        + b"[2025-11-12 11:12:17,145 E 233 233] logging.cc:474: *** SIGSEGV received at time=1762945937 on cpu 6 ***\n"
        + tag
        + b"Fatal Python error: Segmentation fault\n"
    )
    report = analyze_bytes(log)
    assert report.state == "failed"
    assert report.failure is not None and report.failure.rank == "pid233"
    assert report.error == "Fatal Python error: Segmentation fault"


@pytest.mark.parametrize(
    "error",
    [b"KeyboardInterrupt: terminated", b"SystemExit: 1", b"KeyboardInterrupt"],
)
def test_an_error_line_named_interrupt_exit_or_failure_closes_its_traceback(error: bytes) -> None:
    """GIVEN vLLM's API server stopped before its engine starts (batch 42: `raise KeyboardInterrupt("terminated")` in
    its signal handler) WHEN the log is read THEN the traceback's error is its error line, not its header: the
    pre-filter reads a line whose class ends in Interrupt or Exit (or Failure), as the failure checks do."""
    log = (
        b"(APIServer pid=1) INFO 04-19 12:30:19 [utils.py:233] non-default args: {'model_tag': 'm'}\n"
        b"(APIServer pid=1) Traceback (most recent call last):\n"
        b'(APIServer pid=1)   File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", '
        b"line 564, in signal_handler\n"
        b'(APIServer pid=1)     raise KeyboardInterrupt("terminated")\n'
        b"(APIServer pid=1) " + error + b"\n"
    )
    report = analyze_bytes(log)
    assert report.state == "failed"
    # a bare error line says no more than its class: the code line above it is quoted after it
    assert report.error is not None and report.error.startswith(error.decode())
    assert "Traceback" not in report.error


_VALIDATION_TRACEBACK = (
    b"(APIServer pid=9) INFO 06-27 16:55:33 [utils.py:233] non-default args: {'model_tag': 'm'}\n"
    b"(APIServer pid=9) Traceback (most recent call last):\n"
    b'(APIServer pid=9)   File "/x/pydantic/_internal/_dataclasses.py", line 127, in __init__\n'
    b"(APIServer pid=9)     s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)\n"
)


def test_a_pydantic_validation_error_says_its_cause() -> None:
    """GIVEN vLLM's API server failing to build its configuration, pydantic's error line naming only the class and the
    line under it the cause (batch 44; vllm#26161 prints the same form) WHEN the log is read THEN the error holds the
    cause, without pydantic's type and input dump."""
    log = _VALIDATION_TRACEBACK + (
        b"(APIServer pid=9) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        b"(APIServer pid=9)   Value error, Expecting value: line 1 column 1 (char 0) [type=value_error, "
        b"input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs]\n"
        b"(APIServer pid=9)     For further information visit https://errors.pydantic.dev/2.12/v/value_error\n"
    )
    report = analyze_bytes(log)
    assert report.state == "failed"
    assert report.error == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: "
        "Value error, Expecting value: line 1 column 1 (char 0)"
    )


def test_another_processs_line_under_a_validation_error_is_not_its_cause() -> None:
    """GIVEN the line under pydantic's error line logged by another process WHEN the log is read THEN the error is the
    error line alone: another process's words are not its cause."""
    log = _VALIDATION_TRACEBACK + (
        b"(APIServer pid=9) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        b"(EngineCore pid=12)   Value error, something else [type=value_error]\n"
    )
    report = analyze_bytes(log)
    assert report.error == "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"


@pytest.mark.parametrize(
    ("after", "error"),
    [
        # a model's own validator: no location line
        (["  Value error, bad [type=value_error, input_value=1]"], "V: Value error, bad"),
        # a field's error: its location, then its message
        (
            ["limit_mm_per_prompt", "  Input should be a valid dictionary [type=dict_type]"],
            "V: limit_mm_per_prompt: Input should be a valid dictionary",
        ),
        # nothing under it, or something that is not pydantic's
        ([], "V"),
        (["Please verify the following", "1. Provide a valid ID"], "V"),
        (["", "  Value error, late"], "V"),
    ],
)
def test_validation_cause_reads_pydantics_two_forms(after: list[str], error: str) -> None:
    head = "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig"
    got = validation_cause(head, lambda: after)
    assert got == error.replace("V", head, 1)


def test_validation_cause_leaves_other_errors_alone() -> None:
    def never() -> list[str]:
        raise AssertionError("the lines after an ordinary error are not read")

    assert validation_cause("ValueError: No available memory", never) == "ValueError: No available memory"


def _read_frame_uncached(failure: Failure, text: str, frames: tuple[FrameRule, ...]) -> None:
    """_read_frame as it read every rule in turn, before it kept each text's rules."""
    phase_read = model_read = False
    for frame in frames:
        if frame.needle not in text:
            continue
        if frame.whole_name and not re.search(re.escape(frame.needle) + r"(?![A-Za-z0-9_])", text):
            continue  # the needle only as the start of a longer name
        if frame.phase is not None and not phase_read:
            phase_read = True
            if not (frame.names_a_path and failure.frame_phase_by_call):
                failure.frame_phase = frame.phase
                failure.step = frame.step or failure.step
                failure.frame_phase_by_call = not frame.names_a_path
        if frame.model is not None and not model_read:
            model_read = True
            failure.frame_model = frame.model
            if not phase_read:
                failure.step = failure.step or frame.step
        if (phase_read and model_read) or (frame.phase is None and frame.model is None):
            return


_TABLES = [*FRAMES_READ_BY.values(), *ERROR_WORDS_READ_BY.values()]
_NEEDLES = sorted({frame.needle for table in _TABLES for frame in table})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*_NEEDLES, "x", " ", "/"]), max_size=6),
    st.sampled_from(range(len(_TABLES))),
    st.sampled_from([None, "earlier step"]),
)
def test_read_frame_reads_as_every_rule_in_turn_does(words: list[str], table: int, step: str | None) -> None:
    # GIVEN a frame's text made of rules' needles, one of the reader's tables, and a failure that may have a step
    text = "".join(words)
    frames = _TABLES[table]
    expected = Failure("TP0", None, "", "traceback", 0, None, False, step=step)
    _read_frame_uncached(expected, text, frames)
    # WHEN it is read twice (the second time from the kept rules) into fresh failures
    for _ in range(2):
        failure = Failure("TP0", None, "", "traceback", 0, None, False, step=step)
        _read_frame(failure, text, frames)
        # THEN each reads what reading every rule in turn reads
        assert (failure.frame_phase, failure.frame_model, failure.step) == (
            expected.frame_phase,
            expected.frame_model,
            expected.step,
        )
