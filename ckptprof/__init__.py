"""ckptprof: a profiler for safetensors checkpoint loading, replaying SGLang's sharded loading path."""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptprof.api import replay as replay


def __getattr__(name: str) -> Any:
    """``ckptprof.replay`` as the README shows it, without importing torch for ``import ckptprof``."""
    if name == "replay":
        from ckptprof.api import replay

        return replay
    raise AttributeError(f"module 'ckptprof' has no attribute {name!r}")
