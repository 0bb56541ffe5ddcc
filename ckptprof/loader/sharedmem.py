"""Host memory that the rank processes of one replay share: one region, made by rank 0, mapped by every rank.

The region is a memfd (anonymous shared memory), not a file under /dev/shm: containers often give /dev/shm 64 MiB,
and a mapping larger than its file system faults with SIGBUS on first touch instead of failing cleanly. Rank 0
publishes its process id and descriptor number in a small file named by the replay; the other ranks open the same
memory through ``/proc/<pid>/fd/<n>`` (allowed between processes of one user) and map it.

On a CUDA rank the mapping is registered with the driver (``cudaHostRegister``), so copies out of it are
asynchronous DMA like copies out of ``pin_memory`` buffers.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import time
from contextlib import suppress
from typing import Any

import torch

RENDEZVOUS_TIMEOUT_S = 120.0
_POLL_S = 0.01


class SharedMemoryUnavailable(RuntimeError):
    """The ranks cannot share host memory here; the message says why."""


def _rendezvous_path(tag: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"ckptprof-shm-{tag}.json")


class SharedRegion:
    """``size`` bytes every rank of a replay sees at the same addresses' contents, as one uint8 tensor.

    ``create`` (rank 0) then ``attach`` (the others, after rank 0 has published); ``close`` in every rank.
    """

    def __init__(self, size: int, fd: int, owner: bool, tag: str) -> None:
        self.size = size
        self._fd = fd
        self._owner = owner
        self._tag = tag
        self._map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        # 2 MiB pages where the kernel allows them for shared memory (transparent_hugepage/shmem_enabled "advise"
        # or "always"): with 4 KiB pages the copy engine reads the region markedly slower than pin_memory buffers
        # (reports/h200/2026-12-01c-h200-shared-reads), and page-cache reads into it take more TLB misses.
        with suppress(AttributeError, OSError, ValueError):
            self._map.madvise(mmap.MADV_HUGEPAGE)
        self.tensor: torch.Tensor | None = torch.frombuffer(self._map, dtype=torch.uint8)
        self.pinned = False

    @classmethod
    def create(cls, tag: str, size: int) -> SharedRegion:
        """Make the region and publish it under ``tag`` (unique to the replay and its pass)."""
        if not hasattr(os, "memfd_create"):
            raise SharedMemoryUnavailable("shared reads need memfd_create (Linux)")
        fd = os.memfd_create(f"ckptprof-{tag}", 0)
        try:
            os.ftruncate(fd, size)
            region = cls(size, fd, owner=True, tag=tag)
        except BaseException:
            os.close(fd)
            raise
        path = _rendezvous_path(tag)
        scratch = f"{path}.{os.getpid()}.tmp"
        with open(scratch, "w", encoding="utf-8") as out:
            json.dump({"pid": os.getpid(), "fd": fd, "size": size}, out)
        os.replace(scratch, path)  # the others see the whole file or none of it
        return region

    @classmethod
    def attach(cls, tag: str, timeout_s: float = RENDEZVOUS_TIMEOUT_S) -> SharedRegion:
        """Map the region rank 0 published under ``tag``, waiting for it up to ``timeout_s``."""
        path = _rendezvous_path(tag)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with open(path, encoding="utf-8") as src:
                    info = json.load(src)
                break
            except (FileNotFoundError, json.JSONDecodeError):
                if time.monotonic() > deadline:
                    raise SharedMemoryUnavailable(
                        f"rank 0 did not publish its shared memory within {timeout_s:.0f} s"
                    ) from None
                time.sleep(_POLL_S)
        try:
            fd = os.open(f"/proc/{int(info['pid'])}/fd/{int(info['fd'])}", os.O_RDWR)
        except OSError as exc:
            raise SharedMemoryUnavailable(
                f"cannot open rank 0's shared memory through /proc ({exc.strerror}): the ranks must run as one user"
            ) from None
        try:
            return cls(int(info["size"]), fd, owner=False, tag=tag)
        finally:
            os.close(fd)  # the mapping keeps the memory; the descriptor is no longer needed

    def unpublish(self) -> None:
        """Remove the rendezvous file once every rank has attached."""
        with suppress(OSError):
            os.unlink(_rendezvous_path(self._tag))

    def pin(self) -> bool:
        """Register the mapping with CUDA so host-to-device copies out of it are asynchronous DMA."""
        if self.tensor is None or not torch.cuda.is_available():
            return False
        cudart: Any = torch.cuda.cudart()
        code = cudart.cudaHostRegister(self.tensor.data_ptr(), self.size, 0)
        self.pinned = int(getattr(code, "value", code)) == 0  # a cudaError enum: 0 is success
        return self.pinned

    def close(self) -> None:
        if self.tensor is not None and self.pinned:
            with suppress(Exception):
                torch.cuda.cudart().cudaHostUnregister(self.tensor.data_ptr())
            self.pinned = False
        self.tensor = None
        with suppress(BufferError, ValueError):
            self._map.close()  # views still alive elsewhere keep the mapping until the process ends
        if self._owner:
            self.unpublish()
            with suppress(OSError):
                os.close(self._fd)
