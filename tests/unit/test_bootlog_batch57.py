"""Batch 57 (reports/cpu/2026-12-06r-bootlog-unseen): a node of a multi-node SGLang server prints no ready line of its
own; its scheduler's `Decode batch` statistics say it serves (shun8686/for_debug's Ascend decode node), and an error
while it serves is no failure of its boot."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

BOOT = b"""[2026-01-14 11:58:07 DP16 TP16 EP16] Load weight begin. avail mem=60.82 GB
[2026-01-14 12:01:07 DP16 TP16 EP16] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.09 GB
[2026-01-14 12:02:23 DP16 TP16 EP16] Capture cuda graph begin. This can take up to several minutes. avail mem=12.2 GB
[2026-01-14 12:02:51 DP16 TP16 EP16] Capture cuda graph end. Time elapsed: 27.93 s. mem usage=0.79 GB. avail mem=11.4 GB.
"""
DECODE = (
    b"[2026-01-14 12:09:46 DP16 TP16 EP16] Decode batch, #running-req: 17, #token: 86400, token usage: 0.69, "
    b"accept len: 2.67, npu graph: True, gen throughput (token/s): 1.47, #queue-req: 0, \n"
)
CRASH = b"""[2026-01-14 12:10:44 DP16 TP16 EP16] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 2974, in run_scheduler_process
    scheduler.event_loop_overlap_disagg_decode()
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/speculative/eagle_worker_v2.py", line 641, in forward_batch_generation
    batch_output = self.verify(model_worker_batch)
RuntimeError: ACL stream synchronize failed, error code:507011
"""


def test_a_node_seen_decoding_is_serving_and_its_later_error_fails_no_boot() -> None:
    """GIVEN a node's boot with no ready line, its decode statistics, then a crash WHEN read THEN it is ready (serving
    requests, no ready step invented) and the crash is an error after it was ready, not a failure of the boot."""
    report = analyze_bytes(BOOT + DECODE + CRASH)
    assert report.state == "ready"
    assert "serving requests" in report.summary
    assert "ready" not in [phase.name for phase in report.phases]
    assert report.failure is None
    assert any("after the server was ready" in warning and "507011" in warning for warning in report.warnings)


def test_without_decode_statistics_the_same_crash_fails_the_boot() -> None:
    """GIVEN the same boot and crash, nothing served between WHEN read THEN the boot failed (what the rule changes)."""
    report = analyze_bytes(BOOT + CRASH)
    assert report.state == "failed"
    assert report.failure is not None and report.failure.rank == "DP16 TP16 EP16"


def test_a_ready_line_after_decoding_keeps_the_server_ready() -> None:
    """GIVEN a server whose head prints its ready line, then decodes WHEN read THEN its ready step is the ready line's,
    as before: the statistics only speak where no ready line did."""
    ready = b"[2026-01-14 12:03:14] The server is fired up and ready to roll!\n"
    report = analyze_bytes(BOOT + ready + DECODE)
    assert report.state == "ready"
    assert [phase.name for phase in report.phases][-1] == "ready"
    assert "serving requests" not in report.summary


def test_the_warm_up_requests_prefill_says_nothing_served() -> None:
    """GIVEN a server that crashes in its warm-up request (its one `Prefill batch` line, before any ready line) WHEN
    read THEN the boot failed: only decode statistics, logged past the warm-up's few tokens, say it serves."""
    prefill = (
        b"[2026-01-14 12:03:00 DP16 TP16 EP16] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0\n"
    )
    report = analyze_bytes(BOOT + prefill + CRASH)
    assert report.state == "failed"


def test_a_ready_line_after_requests_were_served_still_says_when_it_came_up() -> None:
    """GIVEN a client's request decoded during the warm-up, before the head's ready line WHEN read THEN the ready line
    still gives the boot its ready step (a line says when it came up), and the server is not said to lack one."""
    ready = b"[2026-01-14 12:09:50] The server is fired up and ready to roll!\n"
    report = analyze_bytes(BOOT + DECODE + ready)
    assert report.state == "ready"
    assert [phase.name for phase in report.phases][-1] == "ready"
    assert "no line in the log says when it came up" not in report.summary


def test_the_next_servers_decode_statistics_are_read_after_an_earlier_one_served() -> None:
    """GIVEN one file with a server that served, then a second server's boot that crashes while it serves WHEN read
    THEN the second server is seen serving too: the search for serving lines starts again for each boot."""
    config = b"[2026-01-14 11:57:17] server_args=ServerArgs(model_path='/m/dsr1', tp_size=16)\n"
    later = b"\n".join(
        line.replace(b"2026-01-14 1", b"2026-01-14 2")
        for line in (config + BOOT + DECODE + CRASH).split(b"\n")
    )
    report = analyze_bytes(config + BOOT + DECODE + later)
    assert report.boots == 2
    assert report.state == "ready" and report.failure is None
