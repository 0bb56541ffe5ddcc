"""Reading a run of one bar's frames as its first and last frame (parse.bar_runs) is a shortcut: every real log must
read as it reads when each frame is read on its own line by line, as the line reader reads any other line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.bootlog import analyze_bytes, phases
from ckptprof.bootlog.parse import MAX_LINE_BYTES

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log"))
SAMPLES = [
    # SGLang's shard bar pasted with an empty line between each two frames
    b"[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB\n\n"
    + b"\n\n".join(
        f"Loading safetensors checkpoint shards: {d * 25}% Completed | {d}/4 [00:0{d}<00:03, 1.0it/s]".encode()
        for d in range(5)
    )
    + b"\n\n[2025-01-01 10:00:09 TP0] Load weight end. type=LlamaForCausalLM, avail mem=60.00 GB\n",
    # vLLM's capture bar after its worker's tag, redrawn in place on one line
    b"(EngineCore_DP0 pid=7) INFO 01-01 10:00:00 [gpu_model_runner.py:1] Starting to load model m...\n"
    b"(EngineCore_DP0 pid=7) \r"
    + b"\r".join(
        f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {d * 25}%|##  | {d}/4 [00:0{d}<00:01, 3.0it/s]".encode()
        for d in range(5)
    )
    + b"\n(EngineCore_DP0 pid=7) INFO 01-01 10:00:09 [gpu_model_runner.py:2] Graph capturing finished in 9 secs\n",
]


def _read(data: bytes) -> str:
    return json.dumps(analyze_bytes(data).to_dict(), sort_keys=True, default=str)


def test_the_samples_hold_runs() -> None:
    # The samples are what the shortcut reads: each holds a run of all five frames.
    for sample in SAMPLES:
        start = sample.rfind(b"\n", 0, sample.index(b"%")) + 1
        runs = phases.bar_runs(sample, start)
        assert runs is not None
        ((first, last),) = runs[0]
        assert b" 0/4 " in sample[first[0] : first[1]] and b" 4/4 " in sample[last[0] : last[1]]


def test_runs_read_as_frame_by_frame_reading_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN every real log and the samples, read with runs
    inputs = [log.read_bytes() for log in LOGS] + SAMPLES
    with_runs = [_read(data) for data in inputs]
    # WHEN they are read again, each frame on its own
    monkeypatch.setattr(phases, "bar_runs", lambda block, start: None)
    frame_by_frame = [_read(data) for data in inputs]
    # THEN every report is the same, but where a physical line is longer than the line reader keeps (MAX_LINE_BYTES):
    # one bar's thousand frames on one line, of which a run reads the last and the line reader the 713th.
    names = [log.name for log in LOGS] + [f"sample {n}" for n in range(len(SAMPLES))]
    differ = [name for name, a, b in zip(names, with_runs, frame_by_frame, strict=True) if a != b]
    capped = {
        name
        for name, data in zip(names, inputs, strict=True)
        if max(map(len, data.split(b"\n"))) > MAX_LINE_BYTES
    }
    assert set(differ) <= capped
    assert len(capped) < 5
