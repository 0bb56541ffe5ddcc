"""SGLang's ``--load-format runai_streamer``, driven through the real ``runai-model-streamer`` package.

What SGLang does (read from the 0.5.23 wheel: ``RunaiModelStreamerLoader``, ``runai_safetensors_weights_iterator``):
every safetensors file of the checkpoint is handed to one ``SafetensorsStreamer`` at once; its C++ threads read
the files in chunks (``RUNAI_STREAMER_CONCURRENCY`` readers, set from the extra config's ``concurrency``; a host
memory budget from ``memory_limit``) into host memory, and the rank's loop takes each tensor as it is ready and
copies it (narrowed for TP) into its parameter - a pageable host-to-device copy. A local path is not streamed
"distributed": each rank reads every file itself. The streamer tensors stay on the host (device "cpu").

Recorded per rank: waiting for the next tensor (the streamer's reads, storage or page cache) as "read" on the
shard the tensor comes from, the process's storage bytes counted there (the reads are the streamer's threads);
the narrow + copy as "h2d". Starting the stream (reading every header, submitting the requests) is "read" on
the first shard. The streamer reads ahead while the loop copies, so the phases overlap the wall.

When the package is not installed the strategy is unavailable and says so; it is never imitated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, Strategy, StrategyUnavailable, optional_package
from ckptprof.loader.strategies.streamed import StreamedLoad

INSTALL_HINT = "runai-model-streamer is not installed (pip install runai-model-streamer)"


def load_package() -> ModuleType | None:
    return optional_package("runai_model_streamer")


@contextmanager
def _streamer_env(concurrency: int | None, memory_limit: int | None) -> Iterator[None]:
    """The variables SGLang's ``set_runai_streamer_env`` sets from the extra config, for this load only."""
    wanted = {
        "RUNAI_STREAMER_CONCURRENCY": None if concurrency is None else str(concurrency),
        "RUNAI_STREAMER_MEMORY_LIMIT": None if memory_limit is None else str(memory_limit),
    }
    saved = {key: os.environ.get(key) for key in wanted}
    for key, value in wanted.items():
        if value is not None:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class RunaiStreamer(Strategy):
    name = "runai-streamer"
    flags = sglang_flags.load_format("runai_streamer")

    def __init__(self, concurrency: int | None = None, memory_limit: int | None = None) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"strategy runai-streamer: concurrency must be at least 1, got {concurrency}")
        if memory_limit is not None and memory_limit < 0:
            raise ValueError(f"strategy runai-streamer: memory_limit must be >= 0 bytes, got {memory_limit}")
        self.concurrency = concurrency  # None: the streamer's own default
        self.memory_limit = memory_limit  # bytes; None: the streamer's own default
        if concurrency is not None or memory_limit is not None:
            config = {
                key: value
                for key, value in (("concurrency", concurrency), ("memory_limit", memory_limit))
                if value is not None
            }
            self.flags = f"{sglang_flags.load_format('runai_streamer')} {sglang_flags.extra_config(config)}"

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        package = load_package()
        if package is None:
            raise StrategyUnavailable(INSTALL_HINT)

        def stream(load: StreamedLoad) -> None:
            with (
                _streamer_env(self.concurrency, self.memory_limit),
                package.SafetensorsStreamer() as streamer,
            ):
                with rec.read(0, shard=load.first, process=True):
                    streamer.stream_files(load.paths, device="cpu", is_distributed=False)
                load.consume(ctx, streamer.get_tensors())

        StreamedLoad(model, rec).run(stream, "the streamer ended before this file's tensors")
