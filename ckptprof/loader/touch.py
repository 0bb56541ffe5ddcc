"""Fault in the pages a tensor view covers, without copying it.

With safetensors' mmap, ``get_tensor`` returns a view onto the mapped file and the disk reads happen as page
faults when the bytes are first touched - normally inside the GPU copy, which then looks slow. Faulting the
view's pages in first moves that work under the "read" timer, so the copy that follows reads resident memory
and times only the transfer.

``fault_in`` asks the kernel to populate the mapping (``MADV_POPULATE_READ``, Linux 5.14+): the same fault
path - same read-around, same I/O sizes - as the copy's faults, without a trap per page, which alone costs a
third of a warm load. Where the kernel lacks it, one byte of every page is read from user space.

``CKPTPROF_FAULT_IN=touch`` forces the user-space touch everywhere: one trap per fault-around block, exactly
the faults SGLang's copy takes from a mapped file, which a warm decomposed pass otherwise skips (it then runs a
little faster than the faithful one). The session's environment records which method ran.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os

import numpy as np
import torch

PAGE = mmap.PAGESIZE


def segments(t: torch.Tensor) -> tuple[np.ndarray, int]:
    """Start addresses of the contiguous byte runs of ``t`` and the length of each run."""
    item = t.element_size()
    if t.numel() == 0:
        return np.empty(0, dtype=np.int64), 0
    if t.is_contiguous():
        return np.array([t.data_ptr()], dtype=np.int64), t.numel() * item
    # Innermost dims that are laid out contiguously form one run; the outer dims enumerate runs.
    shape, strides = list(t.shape), list(t.stride())
    run = item
    inner = len(shape)
    expected = 1
    while inner > 0 and strides[inner - 1] == expected:
        expected *= shape[inner - 1]
        inner -= 1
    run = expected * item
    starts = np.zeros(1, dtype=np.int64)
    for size, stride in zip(shape[:inner], strides[:inner], strict=True):
        starts = (starts[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride * item).reshape(-1)
    return starts + t.data_ptr(), run


def touch_offsets(starts: np.ndarray, run: int) -> np.ndarray:
    """One address in every page of every run: the run start, one per page step, and the last byte."""
    steps = np.arange(0, run, PAGE, dtype=np.int64)
    points = (starts[:, None] + steps[None, :]).reshape(-1)
    return np.concatenate([points, starts + run - 1])


def touch_pages(t: torch.Tensor) -> int:
    """Read one byte in every page ``t`` covers; returns the number of pages touched. CPU tensors only."""
    if t.device.type != "cpu":
        raise ValueError("touch_pages reads host memory; got a tensor on " + str(t.device))
    starts, run = segments(t)
    if run == 0 or starts.size == 0:
        return 0
    addresses = touch_offsets(starts, run)
    lo = int(addresses.min())
    hi = int(addresses.max()) + 1
    span = np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(lo))
    # The gather reads each address; its (ignored) sum keeps the reads from being optimised away.
    int(span[addresses - lo].sum(dtype=np.uint64))
    return int(np.unique(addresses // PAGE).size)


def read_header_region(path: str) -> int:
    """Read a shard's length prefix and JSON header, as ``safe_open`` is about to, so a cold header's disk
    round-trip lands under "read" instead of "deserialize". Returns the bytes read."""
    with open(path, "rb", buffering=0) as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            return len(prefix)
        length = int.from_bytes(prefix, "little")
        # The header was validated while planning; cap anyway so a file changed since cannot make us read GBs.
        return 8 + len(fh.read(min(length, 100 * 1024 * 1024)))


MADV_POPULATE_READ = 22
# Gaps between strided runs up to this size are populated too: the fault path's read-around fetches them anyway.
_GAP = 128 * 1024
_libc: ctypes.CDLL | None = None
_populate_works = True


def _madvise_populate(start: int, length: int) -> bool:
    """Populate [start, start + length) of this process's mappings; False where the kernel cannot."""
    global _libc, _populate_works
    if not _populate_works:
        return False
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc.madvise.restype = ctypes.c_int
    aligned = start - start % PAGE
    if _libc.madvise(aligned, length + (start - aligned), MADV_POPULATE_READ) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # kernel < 5.14, or a mapping it refuses
        _populate_works = False
        return False
    raise OSError(err, f"madvise(MADV_POPULATE_READ): {errno.errorcode.get(err, err)}")


FAULT_IN_METHODS = ("populate", "touch")


@functools.lru_cache(maxsize=1)
def fault_in_method() -> str:
    """``populate`` (MADV_POPULATE_READ where the kernel has it, the default) or ``touch``; read once."""
    method = os.environ.get("CKPTPROF_FAULT_IN", "populate").strip().lower() or "populate"
    if method not in FAULT_IN_METHODS:
        raise ValueError(f"CKPTPROF_FAULT_IN must be one of {', '.join(FAULT_IN_METHODS)}, got {method!r}")
    return method


def fault_in(t: torch.Tensor) -> None:
    """Bring every page of ``t`` into memory (from storage if it is not cached). CPU tensors only."""
    if t.device.type != "cpu":
        raise ValueError("fault_in reads host memory; got a tensor on " + str(t.device))
    starts, run = segments(t)
    if run == 0 or starts.size == 0:
        return
    if fault_in_method() == "touch":
        touch_pages(t)
        return
    lo = int(starts.min())
    hi = int(starts.max()) + run
    gaps_small = starts.size == 1 or int(np.diff(np.sort(starts)).max()) - run <= _GAP
    if gaps_small:
        if _madvise_populate(lo, hi - lo):
            return
    elif run >= 16 * PAGE and _populate_works and all(_madvise_populate(int(s), run) for s in starts):
        return
    touch_pages(t)
