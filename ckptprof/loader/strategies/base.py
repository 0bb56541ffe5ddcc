"""What every strategy is handed: the rank's parameters, its TP slices, and the recorder."""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass, field

import torch

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.tp_rules import TPSlice, tp_slice
from ckptprof.loader.launch import Launch
from ckptprof.loader.plan import ModelPlan, ReplayPlan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.touch import fault_in
from ckptprof.optional import optional_package as optional_package

TORCH_DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F32": torch.float32,
    "F64": torch.float64,
}
for _name, _attr in (
    ("F8_E4M3", "float8_e4m3fn"),
    ("F8_E5M2", "float8_e5m2"),
    ("F8_E8M0", "float8_e8m0fnu"),
    ("U16", "uint16"),
    ("U32", "uint32"),
    ("U64", "uint64"),
    ("C64", "complex64"),
):
    if hasattr(torch, _attr):
        TORCH_DTYPES[_name] = getattr(torch, _attr)


class StrategyUnavailable(RuntimeError):
    """The strategy cannot run here (a package or a capability is missing); the message says what to do."""


def nonresident(path: str, size: int) -> int:
    """Bytes of the file not in the page cache now (0 when residency cannot be read)."""
    try:
        # Never below 0: a file that grew since the plan can have more bytes cached than the plan knew of.
        return max(0, size - fs.resident_bytes(path))
    except OSError:
        return 0


# Descriptors a faithful pass keeps open for residency checks; a larger checkpoint's other shards open their own.
_MAX_KEPT_FDS = 512


class KeptDescriptors:
    """Every shard of a plan opened once before the timed load, to ask the kernel for its residency at each shard's
    start on that descriptor: the same figure at the same moment (the page cache is the inode's), without an open,
    an fstat of the path and a close inside the wall (a CPU profile of the GPU runs found them there:
    reports/h200/2026-12-02d-h200-faithful-overhead). A shard replaced by another file under the run is then asked
    about on the old file, whose load fails or is flagged as changed anyway."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def open(self, plan: ReplayPlan) -> None:
        self.close()
        for model in plan.models:
            for shard in model.shards:
                if shard.error is not None or shard.path in self._fds:
                    continue
                if len(self._fds) >= _MAX_KEPT_FDS:
                    return
                with suppress(OSError):  # unreadable now: the shard's own open says why, as before
                    # O_NONBLOCK, as fs.resident_bytes: a FIFO named like a shard must not block the run.
                    self._fds[shard.path] = os.open(shard.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with suppress(OSError):
                os.close(fd)

    def __len__(self) -> int:
        return len(self._fds)

    def nonresident(self, path: str, size: int) -> int:
        """Bytes of the shard not in the page cache now (0 when residency cannot be read), as ``nonresident``."""
        fd = self._fds.get(path)
        if fd is None:
            return nonresident(path, size)
        try:
            return max(0, size - fs.resident_bytes_fd(fd))
        except OSError:
            return 0


@dataclass
class LoadContext:
    """One rank's view of the load: its device, TP position and pre-allocated per-rank parameters."""

    rank: int
    tp: int
    device: torch.device
    expert_parallel: bool = False
    decompose: bool = True  # touch pages under the read timer before copying (False: SGLang's exact sequence)
    params: dict[tuple[str, str], torch.Tensor] = field(default_factory=dict)
    slices: dict[tuple[str, str], TPSlice] = field(default_factory=dict)
    launch: Launch | None = (
        None  # how the rank was started (None: spawned by ckptprof, the TP group on this node)
    )

    @property
    def position(self) -> Launch:
        """The rank's place in its launch: torchrun's global and node-local ranks, or the spawned TP group's."""
        return self.launch if self.launch is not None else Launch.spawned(self.rank, self.tp)

    def allocate(self, model: ModelPlan) -> int:
        """Allocate every parameter at its per-rank shape on the device, as SGLang builds the model first."""
        allocated = 0
        for shard in model.shards:
            for name, (dtype, shape) in (shard.tensors or {}).items():
                sl = tp_slice(name, shape, self.rank, self.tp, self.expert_parallel, model.num_experts)
                self.slices[(model.role, name)] = sl
                if sl.skipped or dtype not in TORCH_DTYPES:
                    continue
                param = torch.empty(sl.param_shape, dtype=TORCH_DTYPES[dtype], device=self.device)
                if self.device.type == "cpu":
                    # cudaMalloc hands back mapped memory; fresh host memory would page-fault inside the timed
                    # copy instead, so the stand-in faults it in here, at allocation, like the device does.
                    param.zero_()
                self.params[(model.role, name)] = param
                allocated += param.numel() * param.element_size()
        return allocated

    def narrow(self, role: str, name: str, full: torch.Tensor) -> torch.Tensor | None:
        """The rank's slice of a full CPU tensor (a view: no bytes move), or None if this rank skips it."""
        sl = self.slices.get((role, name))
        if sl is None or sl.skipped or (role, name) not in self.params:
            return None
        if sl.dim is None:
            return full
        return full.narrow(sl.dim, sl.start, sl.length)

    def destination(self, role: str, name: str) -> torch.Tensor:
        """The part of the parameter a slice is copied into (all of it but for the last rank of an uneven split)."""
        param = self.params[(role, name)]
        sl = self.slices[(role, name)]
        if sl.dim is not None and sl.length != param.shape[sl.dim]:
            param = param.narrow(sl.dim, 0, sl.length)
        return param

    def copy(self, role: str, name: str, src: torch.Tensor) -> None:
        """``param.data.copy_(slice)``: synchronous, from pageable host memory."""
        self.destination(role, name).copy_(src)


class Strategy:
    """A loading path. ``load_model`` loads one model through the recorder; ``prepare`` is set-up a server does
    before loading (process groups, buffer rings: outside the timed wall) and ``close`` releases it - both do
    nothing unless a strategy needs them."""

    name: str
    flags: str  # the SGLang flags that select this path

    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """Before the timed load (after the parameters are allocated, before the ranks start together)."""

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """After the load, whatever its outcome."""


def copy_slice(ctx: LoadContext, role: str, name: str, full: torch.Tensor, rec: Recorder) -> None:
    """SGLang's weight_loader on a tensor whose bytes are already in memory: narrow it to this rank's slice
    ("deserialize") and ``copy_`` that into the parameter ("h2d")."""
    with rec.deserialize():
        src = ctx.narrow(role, name, full)
    if src is not None:
        with rec.h2d(src.numel() * src.element_size()):
            ctx.copy(role, name, src)
    rec.tensor_done()


def replay_tensor(ctx: LoadContext, role: str, name: str, full: torch.Tensor, rec: Recorder) -> None:
    """What SGLang's weight_loader does with one ``(name, cpu_tensor)`` pair: narrow it to this rank's slice and
    ``copy_`` that into the parameter - with the slice's pages faulted in first, under "read", when decomposing."""
    with rec.deserialize():
        src = ctx.narrow(role, name, full)
    if src is not None:
        with rec.read(full.numel() * full.element_size()):
            if ctx.decompose:
                fault_in(src)
        with rec.h2d(src.numel() * src.element_size()):
            ctx.copy(role, name, src)
    rec.tensor_done()
