"""Which boot phase and which weight loader a tqdm bar belongs to, by its description.

Both engines draw their bars on global rank 0 only. The first matching prefix of the engines' bar table
(ckptprof/engines/log_bars.py) wins; a description no entry knows is matched by keywords (a bar about shards or
weights is a load, one about graphs a capture) and belongs to no loader.
"""

from __future__ import annotations

from ckptprof.engines.log_bars import BARS, BarKind

_LOAD_WORDS = ("shard", "loading", "weight")
_GRAPH_WORDS = ("graph", "capturing")

__all__ = ["BARS", "BarKind", "bar_kind"]


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
