"""The storage probe on a real network file system (sshfs over a private sshd), checked against dd."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from ckptprof.checkpoint import fs
from ckptprof.probe import storage

pytestmark = [pytest.mark.sshfs, pytest.mark.slow]

FILES = 4
FILE_BYTES = 50 * 10**6  # 200 MB in all: about 2 s per pass at the default 100 MB/s cap


def _populate(source: Path) -> list[str]:
    rng = np.random.default_rng(0)
    names = []
    for i in range(FILES):
        name = f"model-{i + 1:05d}-of-{FILES:05d}.safetensors"
        # Random bytes: sshfs/ssh compression or sparse-file tricks must not flatter the numbers.
        (source / name).write_bytes(rng.integers(0, 256, FILE_BYTES, dtype=np.uint8).tobytes())
        names.append(name)
    return names


def _digest(paths: Sequence[Path]) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def test_sshfs_mount_has_its_fs_type(sshfs_mount) -> None:
    mount, source = sshfs_mount
    (source / "a.safetensors").write_bytes(b"x" * 4096)
    assert fs.fs_type(mount) == "fuse.sshfs"
    assert fs.fs_type(mount / "a.safetensors") == "fuse.sshfs"
    assert fs.fs_type(source) != "fuse.sshfs"


def test_probe_cold_ceiling_matches_an_independent_read(
    capped_sshfs_mount, independent_read: Callable[[Sequence[Path], bool], float]
) -> None:
    sshfs_mount = capped_sshfs_mount
    names = _populate(sshfs_mount.source)
    # Both reads below see the server with these files in its own page cache: what is compared is the
    # network file system path (ssh, sftp, FUSE), measured the same way by the probe and by dd.
    source_files = [sshfs_mount.source / n for n in names]
    fs.warm_cache(source_files)
    before = _digest(source_files)
    files = [sshfs_mount.mount / n for n in names]

    result = storage.measure_storage(files, sample_bytes=10**9, streams=4)
    reference = independent_read(files, result["storage_method"] == storage.METHOD_O_DIRECT)

    probe = result["storage_read_GBps"]
    assert result["fs_type"] == "fuse.sshfs"
    assert result["storage_sample_bytes"] >= FILES * FILE_BYTES
    assert result["storage_cold_verified"] is True, result["notes"]
    assert abs(probe - reference) <= 0.15 * reference, (
        f"probe {probe:.3f} GB/s vs dd {reference:.3f} GB/s ({sshfs_mount.how}): {result}"
    )
    # The link cap binds: the probe measured the network file system, not a local cache.
    assert probe <= 1.1 * sshfs_mount.rate_cap_bytes_per_s / 1e9, result
    # The page cache is much faster than this network path, and the probe saw that too.
    assert result["page_cache_read_GBps"] > 2 * probe, result
    # Probing never writes to the files.
    assert _digest(source_files) == before


def test_drop_cache_on_sshfs_leaves_the_files_alone(sshfs_mount) -> None:
    mount, source = sshfs_mount
    data = os.urandom(8 * 1024 * 1024)
    (source / "s.safetensors").write_bytes(data)
    path = mount / "s.safetensors"
    assert fs.warm_cache([path]) == len(data)
    result = fs.drop_cache([path])
    assert result.ok, result.note
    assert "fuse.sshfs" in result.note  # says the server may still cache it
    assert (source / "s.safetensors").read_bytes() == data
