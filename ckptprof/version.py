"""The package's version, in a module of its own so that what records it imports nothing else of ckptprof."""

from __future__ import annotations

__version__ = "0.1.0"
