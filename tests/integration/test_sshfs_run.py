"""`ckptprof run` on a real network file system: a checkpoint served over sshfs (FUSE) from a private sshd,
behind a bandwidth-capped veth pair. The run must call it storage-bound, name fuse.sshfs, and measure a storage
ceiling within 15% of an independent read of the mount; the same checkpoint on local disk, warm, must not be
called storage-bound."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from ckptprof import api
from ckptprof.checkpoint.synth import synthesize

pytestmark = [pytest.mark.sshfs, pytest.mark.slow]


def _digests(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


def test_run_over_sshfs_is_storage_bound_and_names_the_fs(
    capped_sshfs_mount, independent_read: Callable[[Sequence[Path], bool], float]
) -> None:
    mount, source = capped_sshfs_mount
    # GIVEN a 120 MB synthetic draft served at ~100 MB/s over sshfs
    synthesize(source / "eagle3", preset="eagle3-draft", shards=8, size=120_000_000, seed=3)
    ckpt = mount / "eagle3"
    before = _digests(source / "eagle3")
    # WHEN ckptprof replays it from a cold cache, probing the mount in the same run
    session = api.replay(ckpt, tp=1, devices="cpu", cache="cold", probe=True, probe_sample_bytes=120_000_000)
    # THEN it is storage-bound on fuse.sshfs, with a ceiling that an independent reader confirms
    v = session.verdict
    assert session.models[0].fs_type == "fuse.sshfs"
    assert v.bottleneck == "storage", v.summary
    assert "fuse.sshfs" in v.summary
    assert v.network_fs is True
    assert any("local NVMe" in r for r in v.recommendations)
    ceiling = session.ceilings.storage_read_GBps
    files = sorted(ckpt.glob("*.safetensors"))
    reference = independent_read(files, session.ceilings.storage_method == "o_direct")
    assert abs(ceiling - reference) / reference < 0.15, (ceiling, reference)
    assert _digests(source / "eagle3") == before  # nothing written to the checkpoint


def test_same_checkpoint_on_local_disk_warm_is_not_storage_bound(tmp_path: Path) -> None:
    ckpt = tmp_path / "eagle3"
    synthesize(ckpt, preset="eagle3-draft", shards=8, size=120_000_000, seed=3)
    session = api.replay(ckpt, tp=1, devices="cpu", cache="warm", probe=True, probe_sample_bytes=120_000_000)
    assert session.verdict.bottleneck != "storage", session.verdict.summary
    assert session.verdict.cold_fraction < 0.05
