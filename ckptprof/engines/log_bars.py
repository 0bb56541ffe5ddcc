"""The progress bars the engines and their weight loaders draw during a boot: which phase and which loader each
belongs to, by the start of its description. A new loader's bar is one more row; the first matching prefix wins.

Read by the boot-log reader (ckptprof/bootlog/bars.py, which also matches the descriptions no row knows by
keywords). Imports nothing else from ckptprof.
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
