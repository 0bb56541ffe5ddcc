"""Decoration around a record (indentation, colours mangled by a paste, nested process tags, a terminal's NUL,
time-only stamps) is taken off before the record is read: the record inside is the same one (#33 item 2)."""

from __future__ import annotations

import pytest

from ckptprof.bootlog.parse import Record, parse_record
from ckptprof.bootlog.timestamps import timestamp_seconds

VLLM_RECORD = "INFO 01-30 11:53:52 model_runner.py:1115] Loading model weights took 7.5100 GB"


@pytest.mark.parametrize(
    "line",
    [
        "    " + VLLM_RECORD,  # a Markdown list item's code block
        "\t" + VLLM_RECORD,
        "^@" + VLLM_RECORD,  # a NUL as the terminal showed it
        "\x00" + VLLM_RECORD,
    ],
)
def test_a_decorated_untagged_vllm_record_reads_as_the_bare_one(line: str) -> None:
    assert parse_record(line) == parse_record(VLLM_RECORD)


@pytest.mark.parametrize(
    "line",
    [
        # the ESC byte turned into U+FFFD by a paste, and written out as '#033' by CloudWatch
        "\ufffd[1;36m(VllmWorker rank=3 pid=4867)\ufffd[0;0m ERROR 07-26 18:47:24 [multiproc_executor.py:511] boom",
        "#033[1;36m(VllmWorker rank=3 pid=4867)#033[0;0m ERROR 07-26 18:47:24 [multiproc_executor.py:511] boom",
        "    (VllmWorker rank=3 pid=4867) ERROR 07-26 18:47:24 [multiproc_executor.py:511] boom",
    ],
)
def test_a_worker_tag_behind_decoration_names_its_rank(line: str) -> None:
    record = parse_record(line)
    assert (record.rank, record.style, record.level, record.message) == ("rank3", "vllm", "ERROR", "boom")


def test_the_innermost_process_tag_names_the_rank_behind_a_ray_task_tag() -> None:
    # GIVEN vLLM's engine core run inside a Ray task: Ray's tag comes first, vLLM's own second
    line = (
        "(inference_worker_task pid=6758, ip=10.128.0.88) (EngineCore_DP0 pid=7110) INFO 01-15 15:45:29 "
        "[weight_utils.py:162] Loading weights from /x/model-00001-of-00004.safetensors"
    )
    # THEN the record is vLLM's, on the engine core's rank
    record = parse_record(line)
    assert (record.rank, record.style, record.timestamp) == ("DP0", "vllm", "01-15 15:45:29")
    assert record.message == "Loading weights from /x/model-00001-of-00004.safetensors"


def test_sglang_records_with_a_time_only_prefix_are_sglang_records() -> None:
    # SGLang 0.3 wrote `[17:43:23 TP6]`: no date
    assert parse_record("[17:43:23 TP6] Load weight end. type=X") == Record(
        "17:43:23", "TP6", "Load weight end. type=X", "sglang"
    )
    assert timestamp_seconds("17:43:23") is not None
    assert timestamp_seconds("17:43:25") - timestamp_seconds("17:43:23") == 2.0  # type: ignore[operator]


def test_vllm_before_0_8_wrote_its_source_tag_without_the_opening_bracket() -> None:
    # vLLM 0.6-0.7: "INFO 10-10 18:57:39 model_runner.py:1008] ..." (0.8 on: "[model_runner.py:1008]")
    old = parse_record(
        '(VllmWorkerProcess pid=25847) ERROR 03-06 01:17:36 multiproc_worker_utils.py:240]   File "/x.py", line 1'
    )
    new = parse_record(
        '(VllmWorkerProcess pid=25847) ERROR 03-06 01:17:36 [multiproc_worker_utils.py:240]   File "/x.py", line 1'
    )
    assert old == new
    assert old.message == '  File "/x.py", line 1'


@pytest.mark.parametrize(
    "decoration",
    [
        "2025-03-07 23:50:27,531 - __main__ - INFO - ",  # a pipeline re-logging the server through `logging`
        "2025-02-04 21:21:40 ",  # Docker Desktop's log view
        "sglang-1  | 2025-02-04T21:21:40.000Z ",  # unknown collectors, nested
    ],
)
def test_any_prefix_before_a_whole_record_prefix_is_decoration(decoration: str) -> None:
    record = "[2025-03-07 23:50:27 TP0] Load weight begin. avail mem=22.46 GB"
    assert parse_record(decoration + record) == parse_record(record)
    vllm = (
        "(VllmWorker rank=1 pid=7) INFO 04-26 20:27:48 [gpu_model_runner.py:1299] Starting to load model m..."
    )
    assert parse_record(decoration + vllm) == parse_record(vllm)
