"""How one replay runs: every option the CLI, the Python API and the pytest plugin can set, in one place.

``ckptprof.api.replay(target, draft, options)`` and ``build_plan(target, draft, options)`` take it; both still take
the same names as keywords (``tp=8``), which override the options given.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

# `cache` for a run that loads cold and then the same load warm: what the cold load took beyond the warm one is what
# storage cost it (ckptprof.run.referee).
COLD_THEN_WARM = "cold,warm"

# A rank that reports nothing for this long is hung: `run` stops the pass and says where the rank was.
DEFAULT_RANK_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class ReplayOptions:
    tp: int = 1
    """Tensor-parallel ranks, one process each (under torchrun: the launch's WORLD_SIZE)."""

    devices: str | tuple[str, ...] = "cpu"
    """``cpu``, ``cuda`` (every visible GPU), ``cuda:0-7``, ``cuda:0,3``, or the names; ranks map round-robin."""

    cache: str = "warm"
    """``cold`` (drop the checkpoint's pages first), ``warm`` (read them in first), ``as-is``, or ``cold,warm``
    (``COLD_THEN_WARM``: cold, then the same load warm, to measure what storage cost the cold load)."""

    order: str = "sorted"
    """Shard order: ``sorted`` (SGLang from 0.5.13) or ``glob`` (the file system's listing, older releases)."""

    strategy: str = "sglang"
    """The loading path (``ckptprof.loader.strategies.AVAILABLE``)."""

    strategy_params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the strategy, e.g. ``{"num_threads": 16}`` for ``sglang-mt``."""

    draft_strategy: str | None = None
    """The draft's own path (SGLang's ``--speculative-draft-load-format``); None: the draft loads like the target."""

    draft_strategy_params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the draft's strategy."""

    faithful: bool = False
    """Also run SGLang's exact sequence, timing only shard walls, and compare the decomposed wall with it."""

    faithful_rounds: int = 1
    """Alternate this many faithful and decomposed passes and compare medians (more than 1 implies ``faithful``)."""

    engine_iterator: bool = True
    """Where the engine (sglang, or vllm for its paths) imports here, drive its own weight iterator in the faithful
    passes; False keeps ckptprof's replica of the sequence (to hold the two against each other)."""

    sample_threads: bool = False
    """During the faithful passes (implies ``faithful``), sample every rank's threads from the kernel at about 1 kHz
    and give each model the shares of SGLang's own wall in storage, page cache, cpu and waiting (spawned ranks)."""

    probe: bool = True
    """Measure the ceilings (storage, page cache, memcpy, H2D) before the replay."""

    probe_sample_bytes: int = 2 * 10**9
    """Bytes each cold read of the storage probe reads at most."""

    expert_parallel: bool = False
    """Experts go whole to one rank each (SGLang's EP) instead of being sliced like dense weights."""

    verify: bool = False
    """Each rank returns a digest of every loaded parameter, so strategies can be compared value for value."""

    allow_pickle: bool = False
    """Read ``.bin`` / ``.pt`` checkpoints (``torch.load`` with ``weights_only``)."""

    rank_timeout_s: float | None = None
    """No rank reporting anything for this long is a hang (None: ``$CKPTPROF_RANK_TIMEOUT_S``, else no limit;
    0: no limit). Progress resets it, so a long but moving load is never cut."""

    def with_overrides(self, **overrides: Any) -> ReplayOptions:
        """These options with some fields replaced (None values keep the field as it is)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown replay option(s): {', '.join(unknown)}")
        given = {key: value for key, value in overrides.items() if value is not None}
        for key in ("strategy_params", "draft_strategy_params"):
            if key in given:
                given[key] = dict(given[key])
        if isinstance(given.get("devices"), list):
            given["devices"] = tuple(given["devices"])
        return dataclasses.replace(self, **given)

    def hang_timeout_s(self) -> float | None:
        """The rank timeout in force: this option, else the environment's; None for no limit."""
        value = self.rank_timeout_s
        if value is None:
            value = float(os.environ.get("CKPTPROF_RANK_TIMEOUT_S", "0") or 0)
        return value if value > 0 else None


def split_options(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keywords that are ``ReplayOptions`` fields, the rest)."""
    names = {f.name for f in dataclasses.fields(ReplayOptions)}
    return (
        {k: v for k, v in kwargs.items() if k in names},
        {k: v for k, v in kwargs.items() if k not in names},
    )


def resolve(options: ReplayOptions | None, overrides: dict[str, Any]) -> ReplayOptions:
    """``options`` (or the defaults) with the keyword overrides a caller passed."""
    return (options or ReplayOptions()).with_overrides(**overrides)
