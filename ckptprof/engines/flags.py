"""SGLang's command-line flags for weight loading, spelled once: every strategy, profile and recommendation builds
its flags from here, so a renamed flag is one edit."""

from __future__ import annotations

import json
from typing import Any

LOAD_FORMAT = "--load-format"
DRAFT_LOAD_FORMAT = "--speculative-draft-load-format"
EXTRA_CONFIG = "--model-loader-extra-config"
DISABLE_MMAP = "--weight-loader-disable-mmap"
PREFETCH = "--weight-loader-prefetch-checkpoints"
PREFETCH_THREADS = "--weight-loader-prefetch-num-threads"
DROP_CACHE = "--weight-loader-drop-cache-after-load"


def load_format(name: str) -> str:
    """``--load-format NAME``."""
    return f"{LOAD_FORMAT} {name}"


def extra_config(config: dict[str, Any]) -> str:
    """``--model-loader-extra-config '{...}'``: JSON as a shell would pass it, in single quotes."""
    return f"{EXTRA_CONFIG} '{json.dumps(config, separators=(', ', ': '))}'"


def multithread(num_threads: int, opt_in: bool = True) -> str:
    """The multithread loader with ``num_threads``; ``opt_in`` for releases where it is off by default."""
    config: dict[str, Any] = {"enable_multithread_load": True} if opt_in else {}
    return extra_config({**config, "num_threads": num_threads})


def as_draft(flags: str) -> str:
    """A load format's flags as they select the draft's own format (``--speculative-draft-load-format``)."""
    return flags.replace(f"{LOAD_FORMAT} ", f"{DRAFT_LOAD_FORMAT} ", 1)
