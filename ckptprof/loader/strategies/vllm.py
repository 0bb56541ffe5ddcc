"""vLLM's loading paths (``ckptprof/engines/vllm.py`` says which release does what), replayed per rank.

vLLM's ``safetensors_weights_iterator`` and SGLang's are the same mechanisms under other flags, so each strategy
here is the SGLang replay of that mechanism with vLLM's defaults, names and flags:

- ``vllm``: ``--safetensors-load-strategy lazy`` (and the unset default where vLLM does not prefetch on its own):
  ``safe_open`` + ``get_tensor`` per key, the pages faulting in under the weight loaders' copies.
- ``vllm-eager``: ``--safetensors-load-strategy eager``: each file read whole, deserialised from memory.
- ``vllm-prefetch``: ``--safetensors-load-strategy prefetch`` (and the unset default on NFS / Lustre when the
  checkpoint fits in RAM): the lazy path while background threads (8, 16 MiB reads) warm the page cache with this
  rank's share of the files, ``files[rank::world_size]`` over the global ranks. Unlike vLLM's, the replay's
  prefetcher stops when the rank's load ends (what it would read after that is no part of the load).
- ``vllm-mt``: ``--model-loader-extra-config '{"enable_multithread_load": true}'``: every file submitted at once
  to ``num_threads`` threads (default 8) that map it whole (``load_file``), consumed as they complete.

The files come in the plan's order: ``run --engine vllm`` plans them in the release's order (natural from 0.17,
the directory's before). ``shuffle=true`` on any of them is 0.34's ``--shuffle-safetensors-files``: each rank takes
the files in natural order shuffled by a generator seeded with its global rank, so the ranks start on different
files; a prefetcher's share is still taken from the natural order (vLLM shuffles after starting it).
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import replace

from ckptprof.engines import vllm as vllm_engine
from ckptprof.loader.plan import ModelPlan, ShardPlan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.strategies.no_mmap import SGLangNoMmap
from ckptprof.loader.strategies.prefetch import SGLangPrefetch
from ckptprof.loader.strategies.sglang import SGLang
from ckptprof.loader.strategies.sglang_mt import SGLangMultiThread


def _natural_key(path: str) -> list[int | str]:
    """vLLM's order key: the file's name split into digit runs (as numbers) and the text between them, case kept."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", os.path.basename(path))]


def shuffled_for_rank(model: ModelPlan, rank: int) -> ModelPlan:
    """``model`` with its files in the order vLLM 0.34's ``--shuffle-safetensors-files`` gives global rank ``rank``:
    natural order, then shuffled by ``random.Random(rank)`` (the same generator and seed, so the same order)."""
    shards = sorted(model.shards, key=lambda shard: _natural_key(shard.path))
    random.Random(rank).shuffle(shards)
    return replace(model, shards=shards)


def _in_rank_order(model: ModelPlan, ctx: LoadContext, shuffle: bool) -> ModelPlan:
    """The files in the order this rank's loop takes them: the plan's, or 0.34's shuffle for the rank."""
    return shuffled_for_rank(model, ctx.position.rank) if shuffle else model


def _with_shuffle(flags: str, shuffle: bool) -> str:
    return f"{flags} {vllm_engine.SHUFFLE_FLAG}" if shuffle else flags


class VllmLazy(SGLang):
    name = "vllm"
    flags = vllm_engine.load_strategy("lazy")

    def __init__(self, shuffle: bool = False) -> None:
        super().__init__()
        self.shuffle = shuffle
        self.flags = _with_shuffle(type(self).flags, shuffle)

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        super().load_model(ctx, _in_rank_order(model, ctx, self.shuffle), rec)


class VllmEager(SGLangNoMmap):
    name = "vllm-eager"
    flags = vllm_engine.load_strategy("eager")

    def __init__(self, shuffle: bool = False) -> None:
        super().__init__()
        self.shuffle = shuffle
        self.flags = _with_shuffle(type(self).flags, shuffle)

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        super().load_model(ctx, _in_rank_order(model, ctx, self.shuffle), rec)


class VllmPrefetch(SGLangPrefetch):
    name = "vllm-prefetch"

    def __init__(
        self,
        num_threads: int = vllm_engine.PREFETCH_THREADS,
        block_mib: int = vllm_engine.PREFETCH_BLOCK_BYTES >> 20,
        shuffle: bool = False,
    ) -> None:
        super().__init__(num_threads=num_threads, block_mib=block_mib)
        self.shuffle = shuffle
        self.flags = _with_shuffle(
            vllm_engine.prefetch_flags(vllm_engine.NEWEST, num_threads, block_mib << 20), shuffle
        )
        self._planned: ModelPlan | None = None  # the model in the plan's order, for the prefetcher's share

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        self._planned = model
        try:
            super().load_model(ctx, _in_rank_order(model, ctx, self.shuffle), rec)
        finally:
            self._planned = None

    def share(self, ctx: LoadContext, model: ModelPlan) -> list[ShardPlan]:
        """``files[rank::world_size]`` over the global ranks, in the plan's (the release's) file order: vLLM takes
        the share before it shuffles the files its own loop reads."""
        position = ctx.position
        planned = self._planned if self._planned is not None else model
        return list(planned.shards)[position.rank :: max(1, position.world_size)]


class VllmMultiThread(SGLangMultiThread):
    def __init__(self, num_threads: int = vllm_engine.DEFAULT_NUM_THREADS, shuffle: bool = False) -> None:
        super().__init__(num_threads=num_threads, in_order=False)
        self.name = "vllm-mt"
        self.shuffle = shuffle
        self.flags = _with_shuffle(vllm_engine.multithread(num_threads), shuffle)

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        # vLLM submits the shuffled files to its pool in that order.
        super().load_model(ctx, _in_rank_order(model, ctx, self.shuffle), rec)
