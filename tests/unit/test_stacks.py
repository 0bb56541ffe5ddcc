from __future__ import annotations

from ckptprof.analysis.stacks import top_frames


def test_samples_are_attributed_to_the_innermost_phase_marker() -> None:
    # GIVEN frames: main -> load_model -> _load_shard -> {fault_in -> madvise | copy -> memcpy | get_tensor}
    frames = [
        {"name": "main", "file": "cli.py", "line": 1},
        {"name": "load_model", "file": "sglang.py", "line": 2},
        {"name": "_load_shard", "file": "sglang.py", "line": 3},
        {"name": "fault_in", "file": "touch.py", "line": 4},
        {"name": "madvise", "file": "libc.so.6", "line": 0},
        {"name": "copy", "file": "base.py", "line": 5},
        {"name": "__memmove_avx_unaligned", "file": "libc.so.6", "line": 0},
        {"name": "get_tensor", "file": "safetensors", "line": 0},
    ]
    samples = [[0, 1, 2, 3, 4]] * 3 + [[0, 1, 2, 5, 6]] * 5 + [[0, 1, 2, 7]] + [[0]]
    doc = {
        "shared": {"frames": frames},
        "profiles": [{"type": "sampled", "samples": samples, "weights": [0.01] * 10}],
    }
    # WHEN the profile is summarised
    tops = top_frames(doc)
    # THEN each phase lists its leaf frames with the sampled seconds; samples outside the replay are ignored
    assert tops["read"] == [("madvise (libc.so.6:0)", 0.03)]
    assert tops["h2d"] == [("__memmove_avx_unaligned (libc.so.6:0)", 0.05)]
    assert tops["deserialize"] == [("get_tensor (safetensors:0)", 0.01)]
    assert "other" not in tops


def test_empty_or_odd_documents() -> None:
    assert top_frames({}) == {}
    assert top_frames({"shared": {"frames": []}, "profiles": [{"samples": [[], [5]]}]}) == {}
