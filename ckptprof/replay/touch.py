"""Fault in exactly the pages a tensor view covers, without copying it.

With safetensors' mmap, ``get_tensor`` returns a view onto the mapped file and the disk reads happen as page
faults when the bytes are first touched - normally inside the GPU copy, which then looks slow. Touching one
byte of every page the (possibly strided) view covers moves those faults under the "read" timer, so the copy
that follows reads resident memory and times only the transfer.
"""

from __future__ import annotations

import ctypes
import mmap

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
