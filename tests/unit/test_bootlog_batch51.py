"""Batch 51 (reports/cpu/2026-12-06j-bootlog-unseen): a vLLM log saved as UTF-16 (Windows PowerShell's `>`: a byte
order mark, CRLF), and a notebook cell's error as IPython renders it (`File /path:N, in Class.func(args)`, coloured)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ckptprof.bootlog import analyze_bytes, analyze_path
from ckptprof.bootlog.parse import Utf8Text, parse_record, utf8_bytes

LINES = [
    "INFO 06-17 11:26:37 [parallel_state.py:1] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://h:1",
    "INFO 06-17 11:26:53 [gpu_model_runner.py:1] Starting to load model m...",
    "INFO 06-17 11:28:53 [default_loader.py:1] Loading weights took 2.45 seconds",
    "INFO 06-17 11:28:55 [gpu_worker.py:1] Available KV cache memory: -2.14 GiB",
    "ERROR 06-17 11:28:55 [core.py:1] ValueError: No available memory for the cache blocks.",
]
TEXT = "".join(f"{line}\r\n" for line in LINES)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_log_reads_as_its_text(encoding: str, tmp_path: Path) -> None:
    """GIVEN a log saved as UTF-16 with its byte order mark WHEN read from memory and from a file THEN it reads as the
    same text in UTF-8 does, and the progress counts the file's own bytes."""
    bom = "\ufeff".encode(encoding)
    data = bom + TEXT.encode(encoding)
    expected = analyze_bytes(TEXT.encode())
    assert expected.failure is not None
    assert analyze_bytes(data) == expected
    path = tmp_path / "vllm_log.txt"
    path.write_bytes(data)
    counted: list[int] = []
    report = analyze_path(str(path), on_bytes=counted.append)
    assert (report.framework, report.state, [phase.name for phase in report.phases]) == (
        expected.framework,
        expected.state,
        [phase.name for phase in expected.phases],
    )
    assert sum(counted) == len(data)


@given(
    text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40),
    encoding=st.sampled_from(["utf-16-le", "utf-16-be", "utf-8"]),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6),
)
@example(
    text="INFO 12-01 x\r\n", encoding="utf-16-le", cuts=[1, 4]
)  # the mark's first byte alone, then half of it
@example(text="é", encoding="utf-8", cuts=[1])  # a UTF-8 character cut in two
def test_a_log_fed_in_pieces_reads_as_the_whole(text: str, encoding: str, cuts: list[int]) -> None:
    """GIVEN a log's bytes (UTF-16 with its byte order mark, or UTF-8) cut anywhere, into pieces of any size WHEN fed
    piece by piece (a follower's reads) THEN the text is what the whole file reads as."""
    data = ("\ufeff" + text).encode(encoding) if encoding != "utf-8" else text.encode()
    bounds = sorted({0, len(data), *(cut for cut in cuts if cut < len(data))})
    decoding = Utf8Text()
    fed = b"".join(decoding.feed(data[start:end]) for start, end in itertools.pairwise(bounds))
    assert fed + decoding.feed(b"", final=True) == utf8_bytes(data)


def test_a_log_without_a_byte_order_mark_is_read_as_it_is() -> None:
    """GIVEN UTF-8 text that merely holds NUL pairs WHEN read THEN it is not decoded as UTF-16 (only a byte order mark
    says so)."""
    data = TEXT.encode() + b"\0\0"
    assert analyze_bytes(data).framework == "vllm"


@pytest.mark.parametrize(
    ("line", "frame"),
    [
        (
            "File /vol/env/lib/python3.12/site-packages/vllm/worker/worker.py:314, in Worker._init_cache_engine(self)",
            'File "/vol/env/lib/python3.12/site-packages/vllm/worker/worker.py", line 314, in _init_cache_engine',
        ),
        (
            "File /x/vllm/utils.py:1039, in deprecate_args.<locals>.wrapper.<locals>.inner(*args, **kwargs)",
            'File "/x/vllm/utils.py", line 1039, in inner',
        ),
        # not a frame: the words stay as they are
        ("File /data/model.safetensors not found", "File /data/model.safetensors not found"),
    ],
)
def test_an_ipython_frame_reads_as_pythons(line: str, frame: str) -> None:
    assert parse_record(line).message == frame


def test_a_notebooks_coloured_traceback_places_its_failure() -> None:
    """GIVEN vLLM 0.7's offline engine sizing its KV cache, then IPython's coloured rendering of the out-of-memory error
    WHEN read THEN the failure is in the KV cache step, from the frames' words."""
    lines = [
        "INFO 02-19 10:00:00 llm_engine.py:1] Initializing an LLM engine (v0.7.0) with config: model='m'",
        "INFO 02-19 10:05:00 model_runner.py:1] Loading model weights took 14.2 GB",
        "INFO 02-19 10:05:10 executor_base.py:1] # CUDA blocks: 9000, # CPU blocks: 4681",
        "\x1b[0;31mOutOfMemoryError\x1b[0m                          Traceback (most recent call last)",
        "File \x1b[0;32m/env/lib/python3.12/site-packages/vllm/engine/llm_engine.py:427\x1b[0m, in \x1b[0;36m"
        "LLMEngine._initialize_kv_caches\x1b[0;34m(self)\x1b[0m",
        "File \x1b[0;32m/env/lib/python3.12/site-packages/vllm/worker/cache_engine.py:81\x1b[0m, in \x1b[0;36m"
        "CacheEngine._allocate_kv_cache\x1b[0;34m(self, num_blocks, device)\x1b[0m",
        "\x1b[0;31mOutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate 778.00 MiB.",
    ]
    report = analyze_bytes("".join(f"{line}\n" for line in lines).encode())
    assert report.failure is not None
    assert (report.failure.phase, report.failure.model) == ("kv-cache", "target")
    assert "CUDA out of memory" in report.failure.error
