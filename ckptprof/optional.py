"""The peers' packages (fastsafetensors, Run:ai Model Streamer, InstantTensor) are optional: imported only when a
strategy or a probe needs one, and their absence is an answer, not an error."""

from __future__ import annotations

import importlib
from types import ModuleType


def optional_package(name: str) -> ModuleType | None:
    """A peer's package when it is installed and loads; None otherwise (the strategy is then unavailable)."""
    try:
        return importlib.import_module(name)
    except (ImportError, OSError):  # OSError: its native libraries (CUDA, libstreamer) failed to load
        return None
