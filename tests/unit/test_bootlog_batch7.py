"""What blind batch 7 of issue #33 taught the reader (reports/cpu/2026-12-04-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_bar, parse_record


def _pairs(data: bytes) -> list[tuple[str, str | None]]:
    report = analyze_bytes(data)
    return list(dict.fromkeys((phase.name, phase.model) for phase in report.phases))


def test_a_bar_only_sglang_draws_says_the_log_is_sglangs() -> None:
    # GIVEN a CI copy holding nothing but bars (sglang#6462): the loader's, then SGLang's graph capture bar
    log = (
        b"Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.31it/s]\n"
        b"Capturing batches (avail_mem=8.25 GB):   0%|          | 0/1 [00:00<?, ?it/s]\n"
    )
    assert analyze_bytes(log).framework == "sglang"
    # AND vLLM's capture bar says vLLM
    vllm = log.replace(
        b"Capturing batches (avail_mem=8.25 GB)", b"Capturing CUDA graphs (mixed prefill-decode)"
    )
    assert analyze_bytes(vllm).framework == "vllm"


def test_a_frame_names_its_phase_and_its_model_in_two_rules_words() -> None:
    # GIVEN a crash inside SGLang's EAGLE draft capture runner (sglang#32105)
    log = b"""[2026-07-22 15:49:08 DP0 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py", line 446, in run_once
    ret = self.eagle_worker.draft_forward(forward_batch)
RuntimeError: CUDA error: an illegal memory access was encountered
"""
    failure = analyze_bytes(log).failure
    # THEN it failed capturing the draft's graphs, not the target's
    assert failure is not None and (failure.phase, failure.model) == ("cuda-graph", "draft")


def test_a_harness_tag_before_a_record_or_a_bar_is_decoration() -> None:
    # GIVEN a test harness's `[RAW SERVER] ` before every server line (vllm-ascend#2976)
    record = parse_record(
        "[RAW SERVER] (Worker_TP2 pid=1456) INFO 09-17 05:33:40 [default_loader.py:268] Loading weights took 88.93 s"
    )
    assert (record.rank, record.timestamp, record.style) == ("TP2", "09-17 05:33:40", "vllm")
    assert record.message == "Loading weights took 88.93 s"
    parsed = parse_bar(
        "[RAW SERVER] Loading safetensors checkpoint shards:  98% Completed | 40/41 [01:24<00:02]"
    )
    assert parsed is not None and parsed[0].desc == "Loading safetensors checkpoint shards"
    # AND SGLang's own prefix after such a tag is read too
    tagged = parse_record("[job 7] [2025-08-11 12:58:54 TP3] Load weight begin. avail mem=61.10 GB")
    assert (tagged.rank, tagged.style) == ("TP3", "sglang")


def test_rays_late_copy_of_a_begin_opens_no_second_load() -> None:
    # GIVEN a Ray worker's load end, then Ray's deduplicated copy of its load start, stamped earlier (vllm#6689)
    log = (
        b"(RayWorkerWrapper pid=7, ip=10.0.0.2) INFO 08-07 10:36:23 model_runner.py:692] Loading model weights "
        b"took 24.4023 GB\n"
        b"(RayWorkerWrapper pid=7, ip=10.0.0.2) INFO 08-07 10:27:40 model_runner.py:680] Starting to load model "
        b"/m/llama-405b... [repeated 30x across cluster]\n"
    )
    # THEN one load, the target's, not a draft's after it
    assert _pairs(log) == [("load-weights", "target")]
    # AND the same begin stamped after the end, not a relay, is a second load as before
    later = log.replace(b"10:27:40", b"10:40:00").replace(b" [repeated 30x across cluster]", b"")
    assert _pairs(later) == [("load-weights", "target"), ("load-weights", "draft")]


def test_the_drafter_sharing_the_targets_weights_is_the_drafts_load() -> None:
    # GIVEN TP0 done loading both models, and TP7's drafter sharing the target's embedding (genesis-vllm-patches#24)
    log = b"""(Worker_TP0 pid=1) INFO 05-08 16:18:24 [gpu_model_runner.py:4960] Model loading took 15.26 GiB memory and 23.1 seconds
(Worker_TP7 pid=8) INFO 05-08 16:18:25 [llm_base_proposer.py:1487] Detected MTP model. Sharing target model embedding weights with the draft model.
"""
    assert _pairs(log) == [("load-weights", "target"), ("load-weights", "draft")]


def test_a_quoted_excerpt_followed_by_another_log_is_unquoted() -> None:
    # GIVEN a `> `-quoted traceback (sglang#6081) and after it an unquoted server's lines, more of them
    quoted = b"""> Scheduler hit an exception: Traceback (most recent call last):
>   File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 405, in capture
>     torch.cuda.synchronize()
> RuntimeError: CUDA error: an illegal memory access was encountered
"""
    after = b"".join(b"[2026-08-01 23:37:%02d] Warning: unauthenticated requests\n" % n for n in range(40))
    for log in (quoted, quoted + after):
        report = analyze_bytes(log)
        # THEN the quote's lines read as the server wrote them: its error line is the error, in the capture
        assert report.error is not None and report.error.startswith("RuntimeError: CUDA error"), report.error
