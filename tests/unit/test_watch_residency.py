"""Shard residency as watch samples it: read shards reach 100%, untouched ones stay at 0, only changes are kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.watch.residency import ResidencyTracker


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    out = tmp_path / "ckpt"
    synthesize(out, preset="eagle3-draft", shards=4, size=8_000_000, seed=5)
    return out


def test_a_read_shard_reaches_full_residency_and_the_others_stay_cold(ckpt: Path) -> None:
    files = sorted(ckpt.glob("*.safetensors"))
    if not fs.drop_cache(files).ok:
        pytest.skip("the page cache of these files cannot be dropped here")
    tracker = ResidencyTracker()
    model = tracker.add_model("target", str(ckpt), "--model-path")
    try:
        tracker.sample(0.0, first=True)
        tracker.sample(0.5)  # nothing read: no new point
        files[1].read_bytes()
        tracker.sample(1.0)
        tracker.sample(1.5)
    finally:
        tracker.close()
    by_name = {s.file: s for s in model.shards}
    read, cold = by_name[files[1].name], by_name[files[0].name]
    assert read.resident_at_start == 0 and read.resident == read.bytes and read.fraction == 1.0
    assert (read.first_change_s, read.full_s) == (1.0, 1.0)
    assert read.points == [(0.0, 0), (1.0, read.bytes)]
    assert cold.resident == 0 and cold.full_s is None and cold.points == [(0.0, 0)]
    assert model.total_bytes == sum(f.stat().st_size for f in files)
    assert model.resident_bytes == read.bytes


def test_a_checkpoint_that_is_not_local_is_named_not_followed(tmp_path: Path) -> None:
    tracker = ResidencyTracker()
    hub = tracker.add_model("target", "meta-llama/Llama-3.1-8B", "--model-path")
    empty = tracker.add_model("draft", str(tmp_path), "--speculative-draft-model-path")
    tracker.close()
    assert hub.shards == [] and "not a local checkpoint directory" in (hub.problem or "")
    assert empty.shards == [] and str(tmp_path) in (empty.problem or "")


def test_a_shard_full_when_watch_began_has_no_full_time(ckpt: Path) -> None:
    # docs/watch.md: full_s is null for a shard that was full at the start (it did not become full while watched)
    files = sorted(ckpt.glob("*.safetensors"))
    for f in files:
        f.read_bytes()
    tracker = ResidencyTracker()
    model = tracker.add_model("target", str(ckpt), "--model-path")
    try:
        tracker.sample(0.0, first=True)
        if not all(s.resident >= s.bytes for s in model.shards):
            pytest.skip("the files did not stay in the page cache here")
        tracker.sample(0.5)
        tracker.sample(1.0)
    finally:
        tracker.close()
    assert [(s.first_change_s, s.full_s) for s in model.shards] == [(None, None)] * len(files)
