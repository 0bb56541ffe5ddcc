"""SGLang's ``--load-format instanttensor``, driven through the real ``instanttensor`` package (CUDA only).

What SGLang does (read from the 0.5.23 wheel, ``instanttensor_weights_iterator``): every safetensors file at once
goes to one ``instanttensor.safe_open(files, framework="pt", device=<this GPU>, process_group=<the load group's
device group when it has more than one rank>, copy=True, **extra_config)``; its I/O backend (io_uring / AIO,
O_DIRECT, or mmap on tmpfs) reads the files into a GPU ring buffer, the ranks of the group sharing the reads over
NCCL, and ``tensors()`` yields each tensor already on the GPU (a clone). The model's loader then narrows it and
copies it into the parameter, device to device.

Recorded per rank: waiting for the next tensor (storage reads, the library's host-to-device transfer and the
ranks' exchange, done by its own threads) as "read" on the tensor's shard, with the process's storage bytes;
the narrow + device copy as "h2d". Opening (headers, buffer sizing, the first submissions) is "read" on the
first shard. Ranks that share a GPU cannot form the NCCL group SGLang would use: each then loads every file
alone, and the flags say so.

When the package is not installed, or there is no CUDA device, the strategy is unavailable and says so.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan, ReplayPlan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, Strategy, StrategyUnavailable, optional_package
from ckptprof.loader.strategies.groups import close_group, make_group
from ckptprof.loader.strategies.streamed import StreamedLoad

INSTALL_HINT = "instanttensor is not installed (pip install instanttensor)"
BACKENDS = ("URING", "AIO", "URING_BUFFERED", "AIO_BUFFERED", "CUFILE", "MMAP", "BUFFERED")


def load_package() -> ModuleType | None:
    return optional_package("instanttensor")


class InstantTensor(Strategy):
    name = "instanttensor"
    flags = sglang_flags.load_format("instanttensor")

    def __init__(self, backend: str | None = None) -> None:
        if backend is not None and backend.upper() not in BACKENDS:
            raise ValueError(
                f"strategy instanttensor: backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
            )
        self.backend = None if backend is None else backend.upper()
        if self.backend is not None:
            self.flags = f"{sglang_flags.load_format('instanttensor')} {sglang_flags.extra_config({'backend': self.backend})}"
        self._group: Any = None
        self._store_path: str | None = None

    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        if ctx.device.type != "cuda" or load_package() is None:
            return  # load_model says why it cannot run
        if ctx.tp > 1:
            self._group, self._store_path = make_group(ctx, plan, "it", nccl_only=True)

    def close(self) -> None:
        close_group(self._store_path)
        self._store_path = None
        self._group = None

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        if ctx.device.type != "cuda":
            raise StrategyUnavailable(
                "instanttensor loads to CUDA devices only (SGLang refuses it elsewhere)"
            )
        package = load_package()
        if package is None:
            raise StrategyUnavailable(INSTALL_HINT)
        StreamedLoad(model, rec).run(
            lambda load: self._load(package, ctx, load), "instanttensor ended before this file's tensors"
        )

    def _load(self, package: ModuleType, ctx: LoadContext, load: StreamedLoad) -> None:
        import torch

        kwargs: dict[str, Any] = {}
        if self.backend is not None:
            kwargs["backend"] = [
                getattr(package.Backend, self.backend, None) or getattr(package.BackendPolicy, self.backend)
            ]
        with load.rec.read(0, shard=load.first, process=True):
            handle = package.safe_open(
                load.paths, framework="pt", device=ctx.device, process_group=self._group, copy=True, **kwargs
            )
            handle.__enter__()
        try:
            # A shard is done when its copies have landed.
            load.consume(ctx, handle.tensors(), shard_done=lambda: torch.cuda.synchronize(ctx.device))
        finally:
            handle.__exit__(None, None, None)
