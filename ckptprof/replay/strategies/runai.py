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

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ckptprof.replay.plan import ModelPlan, ShardPlan, UnreadableShard
from ckptprof.replay.recorder import Recorder
from ckptprof.replay.strategies.base import LoadContext, Strategy, StrategyUnavailable, nonresident
from ckptprof.session import ShardTiming

INSTALL_HINT = "runai-model-streamer is not installed (pip install runai-model-streamer)"


def load_package() -> ModuleType | None:
    try:
        return importlib.import_module("runai_model_streamer")
    except (ImportError, OSError):  # OSError: libstreamer.so failed to load
        return None


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
    flags = "--load-format runai_streamer"

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
            self.flags = f"--load-format runai_streamer --model-loader-extra-config '{_json(config)}'"

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        package = load_package()
        if package is None:
            raise StrategyUnavailable(INSTALL_HINT)
        readable: list[ShardPlan] = []
        for shard in model.shards:
            if shard.error is None and shard.tensors is not None:
                readable.append(shard)
                continue
            timing = rec.open_shard(Path(shard.path).name)
            rec.close_shard(timing, UnreadableShard(shard.error or "header not readable"))
        if not readable:
            return
        timings = {
            s.path: rec.open_shard(Path(s.path).name, nonresident_bytes=nonresident(s.path, s.bytes))
            for s in readable
        }
        left = {s.path: len(s.tensors or {}) for s in readable}
        where = {name: s.path for s in readable for name in (s.tensors or {})}
        error: BaseException | None = None
        try:
            with _streamer_env(self.concurrency, self.memory_limit):
                self._stream(package, ctx, model.role, readable, timings, left, where, rec)
        except Exception as exc:
            error = exc
        for path, timing in timings.items():
            if left.get(path, 0) > 0 or error is not None:
                rec.close_shard(
                    timing, error or RuntimeError("the streamer ended before this file's tensors")
                )

    def _stream(
        self,
        package: ModuleType,
        ctx: LoadContext,
        role: str,
        shards: list[ShardPlan],
        timings: dict[str, ShardTiming],
        left: dict[str, int],
        where: dict[str, str],
        rec: Recorder,
    ) -> None:
        first = timings[shards[0].path]
        started = rec.process_storage_bytes()
        with package.SafetensorsStreamer() as streamer:
            with rec.read(0, shard=first, process=True):
                streamer.stream_files([s.path for s in shards], device="cpu", is_distributed=False)
            tensors = streamer.get_tensors()
            while True:
                # The wait is for the streamer's threads, booked on the shard the tensor came from (known only
                # once it arrived), with the process's storage bytes.
                with rec.read_awaited() as awaited:
                    item = next(tensors, None)
                    path = where.get(item[0]) if item is not None else None
                    if item is not None and path is not None:
                        awaited.shard = timings[path]
                        awaited.nbytes = item[1].numel() * item[1].element_size()
                if item is None:
                    return
                name, full = item
                if path is None:
                    continue  # a tensor the plan does not know (the header changed since): not a parameter
                timing = timings[path]
                with rec.use_shard(timing):
                    src = ctx.narrow(role, name, full)
                    if src is not None:
                        with rec.h2d(src.numel() * src.element_size()):
                            ctx.copy(role, name, src)
                    rec.tensor_done()
                del full, src
                left[path] -= 1
                if left[path] == 0:
                    rec.settle_storage(timing, started, timings.values())
                    rec.close_shard(timing)


def _json(config: dict[str, int]) -> str:
    import json

    return json.dumps(config, separators=(", ", ": "))
