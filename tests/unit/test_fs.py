"""File-system facts: fs type, page-cache residency, dropping and warming, on real files of the machine's disk."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.checkpoint import fs
from ckptprof.fstypes import is_network_fs

MiB = 1024 * 1024
# Page-cache states that cannot be dropped: the file *is* memory.
MEMORY_FS = ("tmpfs", "ramfs")


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    """A directory on the machine's disk (/var/tmp), not /tmp, which is often tmpfs."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="ckptprof-fs-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["cachestat", "mincore"])
def residency_method(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run residency tests both through cachestat (where the kernel has it) and through mincore."""
    if request.param == "mincore":
        monkeypatch.setattr(fs, "_cachestat_works", False)
    else:
        probe = Path(tempfile.mkstemp()[1])
        try:
            with open(probe, "rb") as fh:
                if fs._cachestat_pages(fh.fileno(), 0, 0) is None:
                    pytest.skip("cachestat(2) not available on this kernel")
        finally:
            probe.unlink()
    return str(request.param)


def _write(path: Path, nbytes: int) -> Path:
    path.write_bytes(os.urandom(nbytes))
    return path


def _can_drop(path: Path) -> bool:
    return fs.fs_type(path) not in MEMORY_FS


# -- fs_type ---------------------------------------------------------------------------------------------------

Part = namedtuple("Part", "device mountpoint fstype opts")


def _fake_partitions(monkeypatch: pytest.MonkeyPatch, parts: list[tuple[str, str]]) -> None:
    rows = [Part("dev", m, t, "rw") for m, t in parts]
    monkeypatch.setattr(fs.psutil, "disk_partitions", lambda all=False: rows)


def test_fs_type_takes_the_longest_mount_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_partitions(
        monkeypatch,
        [("/", "ext4"), ("/mnt/data", "nfs4"), ("/mnt/data/fast", "xfs"), ("/mnt/dat", "tmpfs")],
    )
    assert fs.fs_type("/mnt/data/ckpt/model.safetensors") == "nfs4"
    assert fs.fs_type("/mnt/data/fast/x") == "xfs"
    assert fs.fs_type("/mnt/data") == "nfs4"
    # /mnt/dat is a string prefix of /mnt/data but not a path prefix of it.
    assert fs.fs_type("/mnt/datax/y") == "ext4"
    assert fs.fs_type("/mnt/dat/y") == "tmpfs"


def test_fs_type_later_mount_over_the_same_point_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_partitions(monkeypatch, [("/", "ext4"), ("/data", "ext4"), ("/data", "fuse.sshfs")])
    assert fs.fs_type("/data/a") == "fuse.sshfs"


def test_fs_type_unknown_without_mounts(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_partitions(monkeypatch, [])
    assert fs.fs_type("/anything") == "unknown"


def test_fs_type_of_real_paths(disk_dir: Path) -> None:
    root = fs.fs_type("/")
    assert root != "unknown"
    assert fs.fs_type(disk_dir) != "unknown"
    assert fs.fs_type("/proc/self/status") == "proc"
    # A path that does not exist yet still belongs to the mount above it.
    assert fs.fs_type(disk_dir / "not-yet" / "x.safetensors") == fs.fs_type(disk_dir)


def test_fs_type_follows_symlinks(disk_dir: Path) -> None:
    link = disk_dir / "proc-link"
    link.symlink_to("/proc/self")
    assert fs.fs_type(link) == "proc"


def test_network_fs_names() -> None:
    assert is_network_fs("nfs4")
    assert is_network_fs("fuse.sshfs")
    assert is_network_fs("lustre")
    assert not is_network_fs("ext4")
    assert not is_network_fs("tmpfs")


# -- residency, drop, warm -------------------------------------------------------------------------------------


def test_empty_file_is_never_resident(disk_dir: Path, residency_method: str) -> None:
    empty = disk_dir / "empty.safetensors"
    empty.touch()
    assert fs.resident_bytes(empty) == 0
    result = fs.drop_cache([empty])
    assert result.ok and result.total_bytes == 0


def test_warm_then_drop_then_warm(disk_dir: Path, residency_method: str) -> None:
    path = _write(disk_dir / "shard.safetensors", 24 * MiB + 123)  # not a whole number of pages
    size = path.stat().st_size

    assert fs.warm_cache([path]) == size
    assert fs.resident_bytes(path) == size  # capped at the file size, not rounded up to pages

    result = fs.drop_cache([path])
    assert result.total_bytes == size
    assert result.dropped_bytes_before == size
    if not _can_drop(path):
        pytest.skip(f"{fs.fs_type(path)}: pages of a memory file system cannot be dropped")
    assert result.ok, result.note
    assert result.resident_bytes_after == fs.resident_bytes(path)
    assert fs.resident_bytes(path) <= fs.drop_tolerance(size)
    assert "dropped" in result.note

    assert fs.warm_cache([path]) == size
    assert fs.resident_bytes(path) == size


def test_drop_flushes_dirty_pages_first(disk_dir: Path) -> None:
    # Just written, so its pages are dirty: DONTNEED alone would skip them; drop_cache fsyncs first.
    path = _write(disk_dir / "dirty.safetensors", 8 * MiB)
    if not _can_drop(path):
        pytest.skip("memory file system")
    result = fs.drop_cache([path])
    assert result.ok, result.note


def test_partial_residency_and_ranges(disk_dir: Path, residency_method: str) -> None:
    path = _write(disk_dir / "half.safetensors", 16 * MiB)
    if not _can_drop(path):
        pytest.skip("memory file system")
    fs.drop_cache([path])
    with open(path, "rb") as fh:
        fh.seek(4 * MiB)
        fh.read(4 * MiB)  # readahead may bring a little more; never less
        fd = fh.fileno()
        assert fs.resident_bytes_fd(fd, 4 * MiB, 4 * MiB) == 4 * MiB
        assert fs.resident_bytes_fd(fd, 0, 4 * MiB) <= 2 * MiB
        whole = fs.resident_bytes_fd(fd)
    assert 4 * MiB <= whole < 16 * MiB


def test_mincore_in_small_windows_agrees(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(disk_dir / "windows.safetensors", 10 * MiB + 5)
    fs.warm_cache([path])
    monkeypatch.setattr(fs, "_cachestat_works", False)
    whole = fs.resident_bytes(path)
    # Windows of 1 MiB: the huge-file path (many mmaps) must give the same answer as one window.
    monkeypatch.setattr(fs, "_RESIDENCY_WINDOW", 1 * MiB)
    assert fs.resident_bytes(path) == whole == path.stat().st_size


def test_drop_and_warm_never_write(disk_dir: Path) -> None:
    path = _write(disk_dir / "ro.safetensors", 4 * MiB)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    mtime = path.stat().st_mtime_ns
    path.chmod(0o444)  # a read-only checkpoint must still be droppable and warmable
    fs.drop_cache([path])
    fs.warm_cache([path])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.stat().st_mtime_ns == mtime


def test_drop_on_memory_fs_says_why() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or fs.fs_type(shm) not in MEMORY_FS or not os.access(shm, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm")
    fd, name = tempfile.mkstemp(dir=shm)
    os.close(fd)
    path = _write(Path(name), 8 * MiB)
    try:
        result = fs.drop_cache([path])
        assert not result.ok
        assert "in memory" in result.note and "tmpfs" in result.note
    finally:
        path.unlink()


def test_drop_tolerance() -> None:
    assert fs.drop_tolerance(0) == 0
    assert fs.drop_tolerance(10 * MiB) == MiB // 2  # small sets: 5%, not the whole file
    assert fs.drop_tolerance(100 * MiB) == 2 * MiB
    assert fs.drop_tolerance(10**10) == 10**8  # large sets: 1%


def test_drop_note_wording() -> None:
    note = fs._drop_note(False, 12, 100, ["fuse.sshfs"], blind=False)
    assert note.startswith("12% still resident")
    assert "another process" in note and "fuse.sshfs" in note
    assert "server side of nfs4" in fs._drop_note(True, 0, 100, ["nfs4"], blind=False)
    assert fs._drop_note(True, 0, 100, ["ext4"], blind=False) == "dropped: 0.0% still resident"
    assert "cannot verify" in fs._drop_note(True, 0, 100, ["ext4"], blind=True)


def test_residency_reliable_for_own_files(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(disk_dir / "mine.safetensors", 4096)
    assert fs.residency_reliable(path)
    # Someone else's read-only file, seen by an ordinary user: the kernel would hide its page cache.
    monkeypatch.setattr(fs.os, "geteuid", lambda: path.stat().st_uid + 4242)
    monkeypatch.setattr(fs.os, "access", lambda p, mode: False)
    assert not fs.residency_reliable(path)
    assert not fs.residency_reliable(disk_dir / "missing")
    result = fs.drop_cache([path])
    assert not result.ok and "cannot verify" in result.note


def test_missing_file_raises(disk_dir: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fs.resident_bytes(disk_dir / "nope")
    with pytest.raises(FileNotFoundError):
        fs.drop_cache([disk_dir / "nope"])
