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
the directory's before).
"""

from __future__ import annotations

from ckptprof.engines import vllm as vllm_engine
from ckptprof.loader.plan import ModelPlan, ShardPlan
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.strategies.no_mmap import SGLangNoMmap
from ckptprof.loader.strategies.prefetch import SGLangPrefetch
from ckptprof.loader.strategies.sglang import SGLang
from ckptprof.loader.strategies.sglang_mt import SGLangMultiThread


class VllmLazy(SGLang):
    name = "vllm"
    flags = vllm_engine.load_strategy("lazy")

    def __init__(self) -> None:
        super().__init__()


class VllmEager(SGLangNoMmap):
    name = "vllm-eager"
    flags = vllm_engine.load_strategy("eager")


class VllmPrefetch(SGLangPrefetch):
    name = "vllm-prefetch"

    def __init__(
        self,
        num_threads: int = vllm_engine.PREFETCH_THREADS,
        block_mib: int = vllm_engine.PREFETCH_BLOCK_BYTES >> 20,
    ) -> None:
        super().__init__(num_threads=num_threads, block_mib=block_mib)
        self.flags = vllm_engine.prefetch_flags(vllm_engine.NEWEST, num_threads, block_mib << 20)

    def share(self, ctx: LoadContext, model: ModelPlan) -> list[ShardPlan]:
        """``files[rank::world_size]`` over the global ranks, in the plan's (the release's) file order."""
        position = ctx.position
        return list(model.shards)[position.rank :: max(1, position.world_size)]


class VllmMultiThread(SGLangMultiThread):
    def __init__(self, num_threads: int = vllm_engine.DEFAULT_NUM_THREADS) -> None:
        super().__init__(num_threads=num_threads, in_order=False)
        self.name = "vllm-mt"
        self.flags = vllm_engine.multithread(num_threads)
