"""ckptprof: a profiler for safetensors checkpoint loading, replaying SGLang's sharded loading path."""

from __future__ import annotations

__version__ = "0.1.0"
