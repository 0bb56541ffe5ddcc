"""What a user asks of one run, before any policy is applied: the fields of `ckptprof run`, typed.

The command line builds one from its flags and the Python API takes one (or its fields as keywords); both then go
through the same policy (``ckptprof.run.policy``) and the same orchestration (``ckptprof.run.execute``), so
``ckptprof.run(RunRequest(...))`` and ``ckptprof run ...`` produce the same session for the same request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptprof.errors import UsageError
from ckptprof.loader.options import COLD_THEN_WARM, ReplayOptions
from ckptprof.loader.plan import CACHE_MODES

# What --cache takes: a cache state for the load, or both in turn (cold, then warm: storage's cost).
RUN_CACHE_MODES = (*CACHE_MODES, COLD_THEN_WARM)

# The flags' defaults, named once: the CLI's help and the API share them.
DEFAULT_PROBE_SAMPLE_BYTES = 2 * 10**9
DEFAULT_SYNTH_SIZE = 512 * 10**6


@dataclass(frozen=True)
class RunRequest:
    """One run as asked for. None means "let the policy decide" (and the policy says in the session what it
    decided and why)."""

    target: str | Path | None = None
    """The checkpoint directory (the verifier); None: the built-in synthetic EAGLE-3 draft."""

    draft: str | Path | None = None
    """The speculative draft checkpoint, loaded after the target."""

    tp: int = 1
    """Tensor-parallel ranks, one process each (under torchrun: the launch's world size)."""

    devices: str | tuple[str, ...] | None = None
    """``cpu``, ``cuda``, ``cuda:0-7``, ``0,1`` (or the names); None: cuda when torch sees one, else cpu."""

    cache: str = "as-is"
    """``cold``, ``warm``, ``as-is`` (record residency and leave the page cache alone), or ``cold,warm``: the same
    load cold and then warm, and storage's cost (cold minus warm) beside the attribution
    (``session.extra["cache_referee"]``)."""

    order: str | None = None
    """Shard order; None: the release's own (SGLang's sorted or glob order, vLLM's natural or glob)."""

    strategy: str | None = None
    """Loading path(s) as the CLI spells them (``sglang-mt:num_threads=16``, ``a,b``, ``all``, ``peers``); None: the
    load format the server's log shows, else the release's default path."""

    draft_strategy: str | None = None
    """The draft's own load format (SGLang's ``--speculative-draft-load-format``) or ``auto``."""

    faithful: bool = False
    faithful_rounds: int = 1
    engine_iterator: bool = True
    sample_threads: bool = False
    expert_parallel: bool = False

    probe: bool = True
    """Measure the storage, page-cache and H2D ceilings (a recent probe of the same file systems is reused)."""

    probe_sample_bytes: int = DEFAULT_PROBE_SAMPLE_BYTES
    reprobe: bool = False
    """Measure the ceilings again even when a recent probe could be reused."""

    probe_max_age_s: float | None = None
    """Reuse a probe younger than this; None: ``$CKPTPROF_PROBE_MAX_AGE_S``, else an hour."""

    synth_size: int = DEFAULT_SYNTH_SIZE
    """Size of the built-in checkpoint (used when ``target`` is None)."""

    engine: str | None = None
    """``sglang`` or ``vllm``; None: vllm for a vLLM server's log or with ``vllm_version``, else sglang."""

    sglang_version: str | None = None
    vllm_version: str | None = None
    verify: bool = False
    allow_pickle: bool = False

    rank_timeout_s: float | None = None
    """A pass with no shard finished for this long is stopped; None: ``$CKPTPROF_RANK_TIMEOUT_S``, else 1800 s;
    0: never."""

    server_log: str | None = None
    """The server's boot log: its load-weights times go next to the replay's, and its load format is replayed."""

    check_predictions: bool = False
    """Replay every flag set the verdict recommends and hold the prediction to the measured wall."""

    py_spy_dir: str | Path | None = None
    """Sample every rank with py-spy and keep the profiles in this folder."""

    @classmethod
    def from_options(
        cls, target: str | Path | None, draft: str | Path | None, options: ReplayOptions
    ) -> RunRequest:
        """A request holding every field of ``options`` as given: a ``ReplayOptions`` is a complete set of choices
        (its own defaults included), so the policy only picks the release profile the session records."""
        return cls(
            target=target,
            draft=draft,
            tp=options.tp,
            devices=options.devices,
            cache=options.cache,
            order=options.order,
            strategy=spec_text(options.strategy, options.strategy_params),
            draft_strategy=spec_text(options.draft_strategy, options.draft_strategy_params)
            if options.draft_strategy
            else None,
            faithful=options.faithful,
            faithful_rounds=options.faithful_rounds,
            engine_iterator=options.engine_iterator,
            sample_threads=options.sample_threads,
            expert_parallel=options.expert_parallel,
            probe=options.probe,
            probe_sample_bytes=options.probe_sample_bytes,
            verify=options.verify,
            allow_pickle=options.allow_pickle,
            rank_timeout_s=options.rank_timeout_s,
        )

    @property
    def first_cache(self) -> str:
        """The cache state of the run's (first) load: ``cold`` for a cold-then-warm run."""
        return "cold" if self.cache == COLD_THEN_WARM else self.cache

    def with_fields(self, **fields: Any) -> RunRequest:
        """This request with some fields replaced; an unknown name is refused (a typo must not pass silently)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise TypeError(f"unknown run field(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **fields)

    def check(self) -> None:
        """Refuse what no policy can make sense of, before anything slow starts."""
        if self.tp < 1:
            raise UsageError("--tp must be at least 1")
        if self.faithful_rounds < 1:
            raise UsageError("--faithful-rounds must be at least 1")
        if self.vllm_version and self.engine not in (None, "vllm"):
            raise UsageError("--vllm-version goes with --engine vllm")
        if self.cache not in RUN_CACHE_MODES:
            raise UsageError(
                f"--cache {self.cache}: choose one of {', '.join(CACHE_MODES)}, or {COLD_THEN_WARM} for both in turn"
            )
        if self.engine not in (None, "sglang", "vllm"):
            raise UsageError(f"--engine {self.engine}: choose sglang or vllm")


def spec_text(name: str, params: dict[str, Any]) -> str:
    """``("sglang-mt", {"num_threads": 16})`` -> ``"sglang-mt:num_threads=16"``, as ``--strategy`` spells it."""
    return ":".join([name, *(f"{key}={value}" for key, value in params.items())])
