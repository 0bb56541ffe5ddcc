"""What blind batch 19 of issue #33 taught the reader (reports/cpu/2026-12-05g-bootlog-unseen/), each as the
smallest log that shows it; the real logs themselves are in tests/fixtures/logs/real and test_bootlog_real.py."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record

WORKER = "(Worker_DP1_TP3_EP7 pid=37645) "
GLOG = "[rank7]:E0106 03:23:01.677000 37645 site-packages/torch/_subclasses/fake_tensor.py:2721] [0/0] "


def test_torchs_log_header_on_a_tracebacks_lines_is_no_part_of_them() -> None:
    # GIVEN a traceback that torch's own logger printed, each line behind its header, behind the worker's prefix
    # (vllm-ascend#5629: a fake-tensor failure right after the load)
    lines = [
        "INFO 01-06 03:22:57 [model_runner_v1.py:2243] Loading model weights took 45.6571 GB",
        GLOG + "failed while attempting to run meta for npu.npu_quant_matmul.default",
        GLOG + "Traceback (most recent call last):",
        GLOG
        + '  File "/usr/local/python3.11.13/lib/python3.11/site-packages/torch/__init__.py", line 1, in _check_with',
        GLOG + "    raise error_type(message_evaluated)",
        GLOG
        + "RuntimeError: When output_dtype is float16 and pertoken_scale is not none, the dtype must be float32",
    ]
    report = analyze_bytes("".join(f"{WORKER}{line}\n" for line in lines).encode())
    # THEN the traceback's error line is the failure's error, on the worker's rank, after its load
    assert report.failure is not None and report.failure.rank == "DP1 TP3 EP7"
    assert report.error == lines[-1][len(GLOG) :]
    assert report.failure.phase is None


@pytest.mark.parametrize(
    ("line", "rank", "message"),
    [
        (
            WORKER + GLOG + "Traceback (most recent call last):",
            "DP1 TP3 EP7",
            "Traceback (most recent call last):",
        ),
        (GLOG + "Traceback (most recent call last):", "rank7", "Traceback (most recent call last):"),
        # glog's header with no rank tag and no compile id
        ("W0106 03:23:01.677000 37645 torch/_dynamo/convert_frame.py:964] Graph break", "", "Graph break"),
        # torch's C++ warnings keep their bracketed form (their own words): not glog's header
        (
            "[rank0]:[W1011 11:30:29.395223968 NPUGraph.cpp:149] Warning: Waiting",
            "rank0",
            "[W1011 11:30:29.395223968 NPUGraph.cpp:149] Warning: Waiting",
        ),
        # a word that starts like a level letter and a digit stays a message
        ("E2E latency: 12 ms", "", "E2E latency: 12 ms"),
    ],
)
def test_glogs_header_comes_off(line: str, rank: str, message: str) -> None:
    record = parse_record(line)
    assert (record.rank, record.message) == (rank, message)


BEGIN = (
    b"(Worker_TP0 pid=15607) INFO 10-11 11:30:28 [model_runner_v1.py:3502] Starting to capture ACL graphs for "
    b"cases: [512, 408, 304, 192, 88, 1], mode: PIECEWISE, uniform_decode: False\n"
)
LOADED = b"(Worker_TP0 pid=15607) INFO 10-11 11:30:20 [model_runner_v1.py:2243] Loading model weights took 1.0 GB\n"
BAR = b"Capturing ACL graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/6 [00:00<?, ?it/s]\n"
CRASH = (
    b"(Worker_TP11 pid=15618) ERROR 10-11 11:32:59 [multiproc_executor.py:671] WorkerProc hit an exception.\n"
)


def test_vllm_ascends_acl_graph_capture_begins_at_its_record() -> None:
    # GIVEN vllm-ascend's capture begun by its record, then a worker's crash (vllm-ascend#3389, no frame read)
    report = analyze_bytes(LOADED + BEGIN + CRASH)
    # THEN the graph step began at the record, and the crash is in it
    assert [(phase.name, phase.start) for phase in report.phases][-1] == ("cuda-graph", "10-11 11:30:28")
    assert report.failure is not None and report.failure.phase == "cuda-graph"


def test_vllm_ascends_acl_graph_bar_is_the_graph_steps() -> None:
    # GIVEN the capture's bar alone after the load (a release or an excerpt without the begin record)
    report = analyze_bytes(LOADED + BAR)
    # THEN the bar opens the graph step, as vLLM's `Capturing CUDA graphs` does, and is the target's
    assert report.state == "cuda-graph"
    assert [(bar.desc, bar.model) for bar in report.progress] == [("Capturing ACL graphs", "target")]
    # AND a paste of that bar alone is vLLM's: only vllm-ascend draws it
    assert analyze_bytes(BAR).framework == "vllm"
