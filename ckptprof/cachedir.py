"""Where ckptprof keeps what it makes once and reuses: the built-in checkpoint, recent probes."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$CKPTPROF_CACHE, else $XDG_CACHE_HOME/ckptprof, else ~/.cache/ckptprof."""
    explicit = os.environ.get("CKPTPROF_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ckptprof"
