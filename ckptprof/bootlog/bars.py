"""Which boot phase and which weight loader a tqdm bar belongs to, by its description.

Both engines draw their bars on global rank 0 only. The first matching prefix wins; a description no entry
knows is matched by keywords (a bar about shards or weights is a load, one about graphs a capture) and belongs
to no loader.
"""

from __future__ import annotations

from typing import NamedTuple


class BarKind(NamedTuple):
    prefix: str
    phase: str
    loader: str | None
    # A bar of this kind is evidence of its phase on its own: it may open the phase when no record did (vLLM V1
    # logs no record when graph capture begins, and an excerpt may start in the middle of a load).
    opens_phase: bool = True


BARS: tuple[BarKind, ...] = (
    BarKind("Loading safetensors checkpoint shards", "load-weights", "default"),
    BarKind("Loading pt checkpoint shards", "load-weights", "default"),
    BarKind("Multi-thread loading shards", "load-weights", "multithread"),
    BarKind("Loading safetensors using Fastsafetensor loader", "load-weights", "fastsafetensors"),
    BarKind("Loading fastsafetensors checkpoint shards", "load-weights", "fastsafetensors"),
    BarKind("Loading safetensors using Runai Model Streamer", "load-weights", "runai_streamer"),
    BarKind("Loading safetensors using InstantTensor", "load-weights", "instanttensor"),
    BarKind("Loading weights with InstantTensor", "load-weights", "instanttensor"),
    BarKind("Capturing CUDA graph", "cuda-graph", None),
    BarKind("Capturing batches", "cuda-graph", None),
    BarKind("Capturing num tokens", "cuda-graph", None),
)

_LOAD_WORDS = ("shard", "loading", "weight")
_GRAPH_WORDS = ("graph", "capturing")


def bar_kind(desc: str) -> BarKind | None:
    for kind in BARS:
        if desc.startswith(kind.prefix):
            return kind
    lowered = desc.lower()
    if any(word in lowered for word in _LOAD_WORDS):
        return BarKind(desc, "load-weights", None, opens_phase=False)
    if any(word in lowered for word in _GRAPH_WORDS):
        return BarKind(desc, "cuda-graph", None, opens_phase=False)
    return None
