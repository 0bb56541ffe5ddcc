"""Batch 50 (reports/cpu/2026-12-06i-bootlog-unseen): docker compose's name for a container it did not number
(`deepseek-v32-exp  | `, sglang#11218), SGLang 0.2's `[gpu_id=N]` worker tags, and flashinfer's printed CUDA errors
(sglang#748)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.wrappers import learn_name_prefix, unwrap

NAME = "deepseek-v32-exp  | "
TAIL = [
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 393, in __init__',
    "    raise Exception(",
    "Exception: Capture cuda graph failed: ",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "",
]


def _log(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode()


def test_an_unnumbered_container_name_comes_off_every_line() -> None:
    """GIVEN every line behind the container's name, padded, and a bar (one line's text empty) WHEN unwrapped THEN the
    server's own lines remain, and the traceback's tail reads as SGLang's failure in its graph capture."""
    named = _log([f"{NAME}{line}".rstrip() if not line else f"{NAME}{line}" for line in TAIL])
    assert unwrap(named) == _log(TAIL)
    report = analyze_bytes(named)
    assert (report.framework, report.state) == ("sglang", "failed")
    assert report.failure is not None and report.failure.phase == "cuda-graph"


def test_a_name_inside_a_numbered_collectors_prefix_and_a_quote_comes_off_too() -> None:
    inner = [f"{NAME}{line}" for line in TAIL if line]
    assert unwrap(_log([f"sglang-1  | {line}" for line in inner])) == _log([line for line in TAIL if line])
    assert unwrap(_log([f"> {line}" for line in inner])) == _log([line for line in TAIL if line])


def test_a_container_log_pasted_before_another_server_keeps_its_name_learned() -> None:
    """GIVEN three lines behind a name, then forty lines of another server's own WHEN the name is learned THEN it is:
    the block's first lines all open with it, though most lines do not."""
    other = ["[2026-04-26 14:38:11 TP0] Load weight begin. avail mem=10.00 GB"] * 40
    assert learn_name_prefix(_log([f"{NAME}{line}" for line in TAIL[:3]] + other)) == b"deepseek-v32-exp  |"


@pytest.mark.parametrize(
    "lines",
    [
        # a word and a bar on two lines only: no collector's
        ["Model        | Throughput", "Qwen         | 12.3", "INFO 01-01 00:00:00 [x.py:1] words"]
        + ["text"] * 10,
        # different words before each bar: a table's rows, not one container's name
        [f"row{number}  | {number}" for number in range(10)],
    ],
    ids=["two-lines", "table-rows"],
)
def test_no_name_is_learned_from_what_no_collector_wrote(lines: list[str]) -> None:
    assert learn_name_prefix(_log(lines)) is None


def test_sglang_02_gpu_id_tags_are_ranks() -> None:
    """GIVEN SGLang 0.2's records, each worker's GPU in its words (`[gpu_id=1] Memory pool end.`) WHEN read THEN one
    rank a GPU: four ranks end the memory pool and begin the capture, and no draft is made up of the second."""
    lines = ["[gpu_id=0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.float16, avail mem=11.57 GB"]
    lines += [f"[gpu_id={gpu}] Memory pool end. avail mem=2.52 GB" for gpu in (3, 0, 2, 1)]
    lines += [
        f"[gpu_id={gpu}] Capture cuda graph begin. This can take up to several minutes." for gpu in range(4)
    ]
    report = analyze_bytes(_log(lines))
    assert [(phase.name, phase.model, phase.ranks) for phase in report.phases] == [
        ("load-weights", "target", 1),
        ("kv-cache", "target", 4),
        ("cuda-graph", "target", 4),
    ]


def test_flashinfers_printed_cuda_error_is_a_failure() -> None:
    """GIVEN flashinfer's print of a failed CUDA call during the capture (it returns the error, which its binding
    raises; the excerpt ends first) WHEN read THEN the boot failed in the capture, with that error."""
    lines = [
        "[gpu_id=0] Capture cuda graph begin. This can take up to several minutes.",
        "CUDA Error: no kernel image is available for execution on the device (209) /tmp/flashinfer/include/"
        "flashinfer/attention/handler.cuh: line 170 at function cudaOccupancyMaxActiveBlocksPerMultiprocessor(...)",
    ]
    report = analyze_bytes(_log(lines))
    assert report.state == "failed"
    assert report.failure is not None and report.failure.phase == "cuda-graph"
    assert "no kernel image is available" in report.failure.error
