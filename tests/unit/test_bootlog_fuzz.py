"""Whatever bytes a log holds, the reader answers and never raises."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog import STATES, analyze_bytes

# Fragments of real records, so that generated input reaches the parsers' deeper paths, not just the pre-filter.
FRAGMENTS = [
    "[2025-11-29 10:00:01 TP3] ",
    "[2025-11-29 10:00:0",
    "[9999-99-99 99:99:99 TP99999999] ",
    "(VllmWorker rank=0 pid=1) ",
    "INFO 11-29 10:00:01 [x.py:1] ",
    "\x1b[1;36m",
    "\r",
    "\n",
    "Load weight begin.",
    "Load weight end. elapsed=99999999999999999999999 s",
    "Init torch distributed ends. elapsed=1e400 s",
    "Capture draft extend cuda graph begin.",
    "Memory pool end.",
    "The server is fired up and ready to roll!",
    "Loading safetensors checkpoint shards:  62% Completed | 40/64 [00:24<00:14,  1.64it/s]",
    "x: 100%|##| 99999999999999999999/1 [99:99:99<?, 0s/it]",
    "Traceback (most recent call last):",
    "RuntimeError: boom",
    "Received sigquit from a child process.",
    "server_args=ServerArgs(tp_size=8, speculative_algorithm='EAGLE3')",
    "server_args=ServerArgs(tp_size=999999, pp_size=999999, dp_size=999999)",
    "Loading weights took 1.5 seconds",
    "Model loading took 4 GiB and 2 seconds",
    "Graph capturing finished in 8 secs",
    "Application startup complete.",
    "%",
    "١٢٣",
]


def check(report_json: dict[str, object]) -> None:
    assert report_json["state"] in STATES
    assert report_json["framework"] in ("sglang", "vllm", "unknown")
    json.dumps(report_json, allow_nan=False)  # strictly valid JSON: no NaN or Infinity


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    check(analyze_bytes(data).to_dict())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=60))
def test_shuffled_record_fragments_never_raise(parts: list[str]) -> None:
    check(analyze_bytes("".join(parts).encode("utf-8", "surrogatepass")).to_dict())
