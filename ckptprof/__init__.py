"""ckptprof: a profiler for safetensors checkpoint loading, replaying SGLang's sharded loading path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptprof.version import __version__ as __version__

if TYPE_CHECKING:
    from ckptprof.api import replay as replay
    from ckptprof.loader.options import ReplayOptions as ReplayOptions


def __getattr__(name: str) -> Any:
    """``ckptprof.replay`` and ``ckptprof.ReplayOptions`` as the README shows them, without importing torch for
    ``import ckptprof``."""
    if name == "replay":
        from ckptprof.api import replay

        return replay
    if name == "ReplayOptions":
        from ckptprof.loader.options import ReplayOptions

        return ReplayOptions
    raise AttributeError(f"module 'ckptprof' has no attribute {name!r}")
