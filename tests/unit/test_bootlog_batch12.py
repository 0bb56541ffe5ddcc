"""What blind batch 12 of issue #33 taught the reader (reports/cpu/2026-12-04g-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

ENGINE = b"(EngineCore pid=47773) "
READ = ENGINE + b"INFO 03-25 14:45:31 [default_loader.py:384] Loading weights took 14.51 seconds\n"
DIED = ENGINE + b"ERROR 03-25 14:45:31 [core.py:1099] EngineCore failed to start.\n"


def test_frames_of_one_bar_glued_on_one_line_are_read_to_the_last() -> None:
    # GIVEN a committed sglang.log whose copy lost tqdm's carriage returns: the bar's three frames on one line
    frames = b"".join(
        b"Multi-thread loading shards: %3d%% Completed | %d/2 [00:00<00:00,  4.22it/s]" % (50 * done, done)
        for done in range(3)
    )
    log = b"[2026-09-24 17:32:48] Load weight begin. avail mem=15.08 GB\n" + frames + b"\n"
    report = analyze_bytes(log)
    # THEN the bar stands at its last frame, and no frame was taken for a record the reader did not understand
    (bar,) = report.progress
    assert (bar.desc, bar.done, bar.total) == ("Multi-thread loading shards", 2, 2)
    assert report.unparsed_records == 0


def test_a_traceback_cut_before_its_error_line_names_the_process_multiprocessing_named() -> None:
    # GIVEN an engine core process whose target raised: multiprocessing prints "Process <name>:" and the
    # traceback, and the paste ends before the error line (vllm#33970)
    tag = b"(EngineCore_DP0 pid=208) "
    log = (
        tag + b"INFO 02-08 15:29:39 [bitsandbytes_loader.py:790] Loading weights with BitsAndBytes quantization.\n"
        b"Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:05<00:00,  1.05s/it]\n"
        + tag + b"Process EngineCore_DP0:\n"
        + tag + b"Traceback (most recent call last):\n"
        + tag + b'  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap\n'
    )  # fmt: skip
    report = analyze_bytes(log)
    # THEN the failure says which process died
    assert report.failure is not None
    assert report.failure.error.startswith("Process EngineCore_DP0: Traceback (most recent call last):")
    # AND its error line, when it comes, is the error
    closed = analyze_bytes(log + tag + b"ValueError: no weights\n")
    assert closed.failure is not None and closed.failure.error == "ValueError: no weights"


def test_a_crash_after_the_weights_are_read_and_before_the_model_is_loaded_is_in_the_load() -> None:
    # GIVEN vLLM V1's engine core logging its weights read, then dying before `Model loading took` (QwenLM/Qwen3.8#64)
    report = analyze_bytes(READ + DIED)
    # THEN it failed in the target's load (load_model had not returned), not after it
    assert report.failure is not None
    assert (report.failure.phase, report.failure.model) == ("load-weights", "target")
    # AND once `Model loading took` ends the step, a crash comes after the load
    loaded = (
        ENGINE
        + b"INFO 03-25 14:45:31 [gpu_model_runner.py:4090] Model loading took 8.1 GiB memory and 15.2 s\n"
    )
    after = analyze_bytes(READ + loaded + DIED)
    assert after.failure is not None and after.failure.phase is None
    # AND so it does once another phase has begun on the rank (the drafter's load)
    drafter = ENGINE + b"INFO 03-25 14:45:31 [gpu_model_runner.py:4070] Loading drafter model...\n"
    drafting = analyze_bytes(READ + drafter + DIED)
    assert drafting.failure is not None
    assert (drafting.failure.phase, drafting.failure.model) == ("load-weights", "draft")
