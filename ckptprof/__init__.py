"""ckptprof: a profiler for safetensors checkpoint loading, replaying SGLang's sharded loading path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptprof.version import __version__ as __version__

if TYPE_CHECKING:
    from ckptprof.loader.options import ReplayOptions as ReplayOptions
    from ckptprof.run.execute import replay as replay
    from ckptprof.run.request import RunRequest as RunRequest


def __getattr__(name: str) -> Any:
    """``ckptprof.replay``, ``ckptprof.RunRequest`` and ``ckptprof.ReplayOptions`` as the README and docs/commands.md show them, without
    importing torch for ``import ckptprof``."""
    if name == "replay":
        from ckptprof.run.execute import replay

        return replay
    if name == "RunRequest":
        from ckptprof.run.request import RunRequest

        return RunRequest
    if name == "ReplayOptions":
        from ckptprof.loader.options import ReplayOptions

        return ReplayOptions
    raise AttributeError(f"module 'ckptprof' has no attribute {name!r}")
