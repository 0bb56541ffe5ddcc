"""Which boot phase and which weight loader a tqdm bar belongs to, by its description.

Both engines draw their bars on global rank 0 only. The first matching prefix of the engines' bar table
(ckptprof/engines/log_bars.py) wins; a description no entry knows is matched by keywords (a bar about shards or
weights is a load, one about graphs a capture) and belongs to no loader.
"""

from __future__ import annotations

from functools import lru_cache

from ckptprof.engines.log_bars import BARS, BarKind

_LOAD_WORDS = ("shard", "loading", "weight")
_GRAPH_WORDS = ("graph", "capturing")

__all__ = ["BARS", "BarKind", "bar_kind"]


@lru_cache(maxsize=64)  # a boot's bars several times over; the corpus's 269 would carry from copy to copy
def bar_kind(desc: str) -> BarKind | None:
    """The kind of a bar by its description (pure: asked up to three times for each new bar, by its phase, its
    loader and the engine it is evidence of)."""
    for kind in BARS:
        if desc.startswith(kind.prefix):
            return kind
    lowered = desc.lower()
    if any(word in lowered for word in _LOAD_WORDS):
        return BarKind(desc, "load-weights", None, opens_phase=False)
    if any(word in lowered for word in _GRAPH_WORDS):
        return BarKind(desc, "cuda-graph", None, opens_phase=False)
    return None
