"""What blind batch 8 of issue #33 taught the reader (reports/cpu/2026-12-04c-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_bar


def _pairs(data: bytes) -> list[tuple[str, str | None]]:
    report = analyze_bytes(data)
    return list(dict.fromkeys((phase.name, phase.model) for phase in report.phases))


def test_a_frame_cut_after_its_count_still_counts() -> None:
    # GIVEN an excerpt whose last loader frame is cut inside its timings (sglang#15464, vllm-omni#5122)
    for cut, done in ((b"5/145 [", 5), (b"5/145 [00:0", 5), (b"5/145", 5)):
        log = (
            b"Loading safetensors checkpoint shards:   3% Completed | 4/145 [00:02<01:09,  2.04it/s]\n"
            b"Loading safetensors checkpoint shards:   3% Completed | " + cut
        )
        # THEN the bar stands at the count the cut frame shows
        report = analyze_bytes(log)
        assert [(bar.done, bar.total) for bar in report.progress][-1] == (done, 145), cut
        # AND keeps the speed the frame before showed (its own timings are gone)
        assert report.progress[-1].rate == 2.04, cut
    # AND a line with a percentage and a ratio but no bar body is no frame
    assert parse_bar("disk usage: 50% 1/2") is None
    bar = parse_bar("Multi-thread loading shards:  34% Completed | 11/32 [00:0")
    assert bar is not None and (bar[0].done, bar[0].elapsed_s, bar[0].eta_s) == (11, None, None)


def test_vllm_v0_capturing_cudagraphs_for_decoding_opens_the_capture() -> None:
    # GIVEN vLLM 0.6.5 (V0) sizing its cache, then starting its capture (vllm#10909)
    log = b"""INFO 12-13 02:09:14 model_runner.py:1094] Loading model weights took 18.4902 GB
INFO 12-13 02:10:29 distributed_gpu_executor.py:58] # GPU blocks: 189945, # CPU blocks: 21845
INFO 12-13 02:10:32 model_runner.py:1409] Capturing cudagraphs for decoding. This may lead to unexpected consequences
"""
    report = analyze_bytes(log)
    # THEN the boot stands in the target's graph capture
    assert report.state == "cuda-graph"
    assert _pairs(log)[-1] == ("cuda-graph", "target")


def test_vllm_records_in_its_bracketed_form_say_vllm() -> None:
    # GIVEN records in vLLM's logger form that no table reads, then a loader bar both engines draw (vllm-omni#5122)
    log = b"""INFO 07-17 08:42:43 [interface.py:301] Using default backend AttentionBackendEnum.TORCH_SDPA for vit attention
INFO 07-17 08:42:43 [mm_encoder_attention.py:372] Using AttentionBackendEnum.TORCH_SDPA for MMEncoderAttention.
Multi-thread loading shards:   3% Completed | 1/32 [00:00<00:13,  2.34it/s]
"""
    # THEN the log is vLLM's
    assert analyze_bytes(log).framework == "vllm"
    # AND SGLang's own records still outweigh vLLM's form where both are (older SGLang imported vLLM's logger)
    sglang = log + b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n"
    assert analyze_bytes(sglang).framework == "sglang"


def test_a_vllm_server_that_logged_only_its_arguments_is_a_boot_of_its_own() -> None:
    # GIVEN a vLLM API server that logged its arguments and nothing more (a blog's `vllm serve`, vLLM 0.19), then an
    # SGLang server's configuration and load (the concatenation test on vllm-myoceane-gptoss20b-a100)
    vllm = b"(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:233] non-default args: {'model': 'openai/gpt-oss-20b'}\n"
    sglang = b"""[2025-01-23 19:34:55] server_args=ServerArgs(model_path='meta-llama/Meta-Llama-3.1-8B-Instruct', tp_size=1)
[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB
"""
    report = analyze_bytes(vllm + sglang)
    # THEN the file holds two boots, the last SGLang's
    assert report.boots == 2 and report.framework == "sglang"
    assert analyze_bytes(vllm + sglang, boot=1).framework == "vllm"
