"""File-system facts about checkpoint files: the file-system type, page-cache residency, dropping and warming.

Used by ``inspect``, by the replay's cache preparation and by the storage probe. Nothing here ever writes to
a checkpoint file: files are opened read-only, and dropping their cache only asks the kernel to forget clean
pages (``posix_fadvise(POSIX_FADV_DONTNEED)``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import errno
import mmap
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from ckptprof.fstypes import is_network_fs

PAGE_SIZE = mmap.PAGESIZE

# mincore() needs one vector byte per page; mapping a whole 100 GB shard at once would need a 25 MB vector
# and a huge virtual range, so residency is asked window by window.
_RESIDENCY_WINDOW = 1 << 30

# A drop counts as successful when less than this much is left resident (a few pages can be pinned by the
# kernel's readahead in flight, or mapped by something that just opened the file).
_DROP_TOLERANCE_FRACTION = 0.01
_DROP_TOLERANCE_BYTES = 2 * 1024 * 1024

_WARM_BUFFER = 16 * 1024 * 1024

# File systems whose server can keep its own cache, which no client-side drop reaches.
_SYS_CACHESTAT = 451  # x86_64 and aarch64 share the number (Linux 6.5+)


def fs_type(path: str | Path) -> str:
    """The type of the file system holding ``path`` (``ext4``, ``nfs4``, ``fuse.sshfs`` ...), or ``unknown``.

    Picks the mount whose mount point is the longest path prefix of the resolved path; when one mount point is
    mounted over another, the later entry (the one on top) wins.
    """
    real = os.path.realpath(os.fspath(path))
    best_type, best_len = "unknown", -1
    try:
        partitions = psutil.disk_partitions(all=True)
    except OSError:
        return "unknown"
    for part in partitions:
        mount = part.mountpoint.rstrip("/") or "/"
        if not _is_under(real, mount):
            continue
        if len(mount) >= best_len:
            best_type, best_len = part.fstype or "unknown", len(mount)
    return best_type


def _is_under(path: str, mount: str) -> bool:
    """Component-wise prefix test, so that /mnt/ab is not taken to be under /mnt/a."""
    if mount == "/":
        return path.startswith("/")
    return path == mount or path.startswith(mount + "/")


# -- residency --------------------------------------------------------------------------------------------------


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


def _load_libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.restype = ctypes.c_int
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    libc.syscall.restype = ctypes.c_long
    return libc


_LIBC = _load_libc()
_MAP_FAILED = ctypes.c_void_p(-1).value
# None: not tried yet; False: the kernel lacks it (or refuses it), so go straight to mincore.
_cachestat_works: bool | None = None


def resident_bytes(path: str | Path) -> int:
    """Bytes of this file that sit in the page cache now (whole pages, capped at the file size).

    Uses cachestat(2) where the kernel has it (Linux 6.5+), else mincore(2) over a read-only shared mapping,
    one window at a time. Since Linux 5.0 both only report page-cache state for files the caller owns or
    could open for writing (or as root); see :func:`residency_reliable`.

    Opening a file on FUSE without ``kernel_cache`` (sshfs's default) invalidates its cached pages, so on
    such mounts this reports (and causes) 0; use :func:`resident_bytes_fd` on a descriptor already open.
    """
    # A bare descriptor, not a file object: replays ask this before every shard, inside the load's wall, and
    # open() builds an io object and checks the path (another fstat) for nothing read through it.
    # O_NONBLOCK: a FIFO named like a shard must never block the run here (its size is 0: nothing resident).
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        return resident_bytes_fd(fd)
    finally:
        os.close(fd)


def resident_bytes_fd(fd: int, offset: int = 0, length: int | None = None) -> int:
    """Resident bytes of ``[offset, offset + length)`` of an open file (``length`` None: to the end)."""
    size = os.fstat(fd).st_size
    end = size if length is None else min(size, offset + length)
    if end <= offset:
        return 0
    # Page-align the range: both system calls work in whole pages.
    start = offset - offset % PAGE_SIZE
    pages = _cachestat_pages(fd, start, end - start)
    if pages is None:
        pages = _mincore_pages(fd, start, end)
    return min(end - offset, pages * PAGE_SIZE)


def residency_reliable(path: str | Path) -> bool:
    """Whether the kernel will tell this process the truth about the file's page cache.

    The kernel hides page-cache state (mincore and cachestat report nothing resident) unless the caller is
    root, owns the file, or could open it for writing, to close a side channel. A drop "verified" under that
    blindness would prove nothing, so callers say so instead.
    """
    if os.geteuid() == 0:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() or os.access(path, os.W_OK)


def _cachestat_pages(fd: int, offset: int, length: int) -> int | None:
    global _cachestat_works
    if _cachestat_works is False:
        return None
    rng = _CachestatRange(offset, length)
    out = _Cachestat()
    ret = _LIBC.syscall(
        ctypes.c_long(_SYS_CACHESTAT),
        ctypes.c_int(fd),
        ctypes.byref(rng),
        ctypes.byref(out),
        ctypes.c_uint(0),
    )
    if ret != 0:
        err = ctypes.get_errno()
        # ENOSYS: old kernel; EPERM/EOPNOTSUPP (hugetlbfs, some sandboxes): fall back for good.
        if err in (errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.EACCES):
            _cachestat_works = False
        return None
    _cachestat_works = True
    return int(out.nr_cache)


# Each byte of a mincore vector mapped to its lowest bit (1: resident), for bytes.translate.
_LOWEST_BIT = bytes(b & 1 for b in range(256))


def _mincore_pages(fd: int, start: int, end: int) -> int:
    """Resident pages in ``[start, end)``; ``start`` is page-aligned (mmap offsets must be)."""
    resident = 0
    offset = start
    while offset < end:
        length = min(_RESIDENCY_WINDOW, end - offset)
        resident += _mincore_window(fd, offset, length)
        offset += length
    return resident


def _mincore_window(fd: int, offset: int, length: int) -> int:
    addr = _LIBC.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap for residency check failed: {os.strerror(err)}")
    try:
        npages = (length + PAGE_SIZE - 1) // PAGE_SIZE
        vec = (ctypes.c_ubyte * npages)()
        if _LIBC.mincore(ctypes.c_void_p(addr), length, vec) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mincore failed: {os.strerror(err)}")
        # Only the lowest bit means "resident"; the others are reserved. Counted in C: a Python loop over the
        # pages took ~55 us per 4 MB shard, checked before every shard inside the load's wall.
        return bytes(vec).translate(_LOWEST_BIT).count(1)
    finally:
        _LIBC.munmap(ctypes.c_void_p(addr), length)


def total_resident_bytes(paths: Iterable[Path]) -> int:
    return sum(resident_bytes(p) for p in paths)


# -- dropping and warming ---------------------------------------------------------------------------------------


@dataclass
class CacheDropResult:
    dropped_bytes_before: int  # resident just before the drop (what the drop had to evict)
    resident_bytes_after: int
    total_bytes: int
    ok: bool
    note: str


def drop_cache(paths: Iterable[Path]) -> CacheDropResult:
    """Evict the files' clean pages from the page cache and verify with a residency check.

    fsync first because DONTNEED skips dirty pages (a checkpoint copied a moment ago can still be dirty).
    The files are opened read-only; fsync on a read-only descriptor is allowed and writes nothing of ours.
    """
    files = [Path(p) for p in paths]
    before = after = total = 0
    fstypes: set[str] = set()
    blind = False
    for path in files:
        total += path.stat().st_size
        before += resident_bytes(path)
        _drop_one(path)
        after += resident_bytes(path)
        fstypes.add(fs_type(path))
        blind = blind or not residency_reliable(path)
    ok = after <= drop_tolerance(total)
    note = _drop_note(ok, after, total, sorted(fstypes), blind)
    if blind:
        ok = False
    return CacheDropResult(before, after, total, ok, note)


def drop_tolerance(total: int) -> int:
    """Bytes that may stay resident for a drop to count as done: 1%, or 2 MiB but never most of a small file."""
    return max(int(total * _DROP_TOLERANCE_FRACTION), min(_DROP_TOLERANCE_BYTES, total // 20))


def _drop_one(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fsync(fd)
        except OSError as exc:
            # Some file systems (pipes, certain FUSE servers, read-only mounts) refuse fsync; the drop
            # below still works for clean pages, and the residency check tells the truth either way.
            if exc.errno not in (errno.EINVAL, errno.EBADF, errno.EROFS, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _drop_note(ok: bool, after: int, total: int, fstypes: list[str], blind: bool) -> str:
    kinds = ", ".join(fstypes) or "unknown"
    if blind:
        return (
            "cannot verify the drop: the kernel hides page-cache state of files this user neither owns nor "
            "may write (run as the owner or root)"
        )
    if ok:
        note = f"dropped: {100.0 * after / total if total else 0.0:.1f}% still resident"
        if any(is_network_fs(t) or t == "unknown" for t in fstypes):
            note += f"; the server side of {kinds} may still cache these files"
        return note
    pct = 100.0 * after / total if total else 0.0
    if any(t in ("tmpfs", "ramfs") for t in fstypes):
        why = f"the files live in memory ({kinds}), so there is no storage behind them to read cold"
    else:
        why = (
            f"pages mapped by another process, or a network file system caching on the server side ({kinds})"
        )
    return f"{pct:.0f}% still resident after the drop: {why}"


def warm_cache(paths: Iterable[Path]) -> int:
    """Read every byte of the files once through the page cache; returns the bytes read."""
    buf = bytearray(_WARM_BUFFER)
    view = memoryview(buf)
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as fh:
            # Sequential advice doubles readahead on most file systems, so warming runs at streaming speed.
            with contextlib.suppress(OSError):
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while True:
                n = fh.readinto(view)
                if not n:
                    break
                total += n
    return total


# -- which mount ------------------------------------------------------------------------------------------------

MOUNTINFO = Path("/proc/self/mountinfo")
_STATX_MNT_ID_UNIQUE = 0x4000  # Linux 6.8+: a mount id never reused until reboot
_AT_STATX_DONT_SYNC = 0x4000  # never ask a network server for this: only the mount id is wanted
_STATX_MNT_ID_OFFSET = 0x90
_STATX_SIZE = 0x100


@dataclass(frozen=True)
class MountIdentity:
    """One mount, as /proc/self/mountinfo and statx(2) name it: a new mount at the same mount point (a remount
    after a network change, another server) differs in ``unique_id`` (Linux 6.8+) and usually in ``mount_id``,
    even where the device number (``st_dev``) is reused."""

    mount_id: int
    unique_id: int | None  # statx's STATX_MNT_ID_UNIQUE; None on older kernels
    device: str  # major:minor
    root: str  # the mounted file system's directory that appears at the mount point
    mount_point: str
    fs_type: str
    source: str
    options: str  # per-mount options, then the file system's own (super) options

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """'fuse.sshfs mount 45 of user@host:/data at /mnt/ckpt'."""
        return f"{self.fs_type} mount {self.mount_id} of {self.source} at {self.mount_point}"


def mount_identity(path: str | Path, mountinfo: str | None = None) -> MountIdentity | None:
    """The mount holding ``path``; None where /proc/self/mountinfo cannot be read or lists no mount for it.

    The mount is the one statx reports for the path when the kernel can say (Linux 5.8+), else the entry whose
    mount point is the longest prefix of the resolved path (the last one listed, the one on top, on a tie).
    """
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    ids = _statx_mount_ids(path)
    entries = [entry for entry in (_mountinfo_entry(line) for line in mountinfo.splitlines()) if entry]
    chosen = None
    if ids is not None:
        chosen = next((e for e in entries if e.mount_id == ids[0]), None)
    if chosen is None:
        real = os.path.realpath(os.fspath(path))
        best = -1
        for entry in entries:
            mount = entry.mount_point.rstrip("/") or "/"
            if _is_under(real, mount) and len(mount) >= best:
                chosen, best = entry, len(mount)
    if chosen is None:
        return None
    unique = ids[1] if ids is not None else None
    return dataclasses.replace(chosen, unique_id=unique)


def _mountinfo_entry(line: str) -> MountIdentity | None:
    # 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue  (proc(5))
    fields = line.split()
    try:
        dash = fields.index("-")
        return MountIdentity(
            mount_id=int(fields[0]),
            unique_id=None,
            device=fields[2],
            root=_unescape(fields[3]),
            mount_point=_unescape(fields[4]),
            fs_type=fields[dash + 1],
            source=_unescape(fields[dash + 2]),
            options=f"{fields[5]};{fields[dash + 3] if len(fields) > dash + 3 else ''}",
        )
    except (ValueError, IndexError):
        return None


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape (\\040 ...)."""
    if "\\" not in field:
        return field
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _statx_mount_ids(path: str | Path) -> tuple[int, int | None] | None:
    """(the mount id, the unique mount id or None) that statx(2) reports for ``path``; None where it cannot."""
    statx = getattr(_LIBC, "statx", None)
    if statx is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    mask = 0x1000 | _STATX_MNT_ID_UNIQUE  # STATX_MNT_ID, and the unique one where the kernel has it
    at_fdcwd = -100
    ret = statx(
        ctypes.c_int(at_fdcwd),
        os.fsencode(os.fspath(path)),
        ctypes.c_int(_AT_STATX_DONT_SYNC),
        ctypes.c_uint(mask),
        buf,
    )
    if ret != 0:
        return None
    got = int.from_bytes(buf.raw[0:4], "little")
    mnt_id = int.from_bytes(buf.raw[_STATX_MNT_ID_OFFSET : _STATX_MNT_ID_OFFSET + 8], "little")
    if got & _STATX_MNT_ID_UNIQUE:
        # The unique id is not the number mountinfo lists; ask again for the old one to find the entry.
        old = ctypes.create_string_buffer(_STATX_SIZE)
        if (
            statx(
                ctypes.c_int(at_fdcwd),
                os.fsencode(os.fspath(path)),
                ctypes.c_int(_AT_STATX_DONT_SYNC),
                ctypes.c_uint(0x1000),
                old,
            )
            != 0
        ):
            return None
        old_id = int.from_bytes(old.raw[_STATX_MNT_ID_OFFSET : _STATX_MNT_ID_OFFSET + 8], "little")
        return old_id, mnt_id
    if got & 0x1000:
        return mnt_id, None
    return None
