"""The stage runner's public face: ``replay(...) -> Session`` and ``replay_strategies(...)``.

These replay exactly what they are told (a ``ReplayOptions`` and keywords) and apply no policy: no release profile
is chosen, no recent probe reused. ``ckptprof.replay()`` (``ckptprof.run.execute``) is what ``ckptprof run`` does;
the stages themselves live in ``ckptprof.run`` (``stages``, ``faithful``, ``strategies``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ckptprof.loader.options import ReplayOptions
from ckptprof.results import Ceilings
from ckptprof.run.interrupted import InterruptedReplay as InterruptedReplay
from ckptprof.run.stages import run_stages
from ckptprof.run.strategies import StrategyRuns as StrategyRuns
from ckptprof.run.strategies import replay_strategies as _replay_strategies
from ckptprof.session import Session

Printer = Callable[[str], None]


def replay(
    target: str | Path,
    draft: str | Path | None = None,
    options: ReplayOptions | None = None,
    *,
    progress: bool = False,
    log: Printer | None = None,
    py_spy_dir: str | Path | None = None,
    ceilings: Ceilings | None = None,
    sglang_release: dict[str, Any] | None = None,
    vllm_release: dict[str, Any] | None = None,
    **overrides: Any,
) -> Session:
    """Replay SGLang's loading of ``target`` (and ``draft``); returns the analysed session.

    ``options`` (``ckptprof.loader.options.ReplayOptions``: ranks, devices, cache mode, strategy, faithful passes,
    probe, ...) say how; any of its fields may also be given as a keyword (``tp=8, cache="cold"``), which wins.
    ``ceilings`` reuses ceilings measured by an earlier call instead of probing again; ``sglang_release`` is the
    SGLang release profile the replay stands for (``ckptprof.engines.sglang``): the verdict spells its flags for it;
    ``vllm_release`` the vLLM one instead (``ckptprof.engines.vllm``: SGLang's flags are then not recommended);
    ``py_spy_dir`` records py-spy profiles of the ranks there; ``progress`` draws bars and ``log`` gets the stages.
    An interrupt raises ``InterruptedReplay`` holding the partial session.

    Under torchrun (RANK / WORLD_SIZE set) this process is one rank; rank 0 returns the full session and the
    other ranks return a session holding only the plan's models and config.
    """
    return run_stages(
        target,
        draft,
        options,
        progress=progress,
        log=log,
        py_spy_dir=py_spy_dir,
        ceilings=ceilings,
        sglang_release=sglang_release,
        vllm_release=vllm_release,
        **overrides,
    )


def replay_strategies(
    target: str | Path,
    draft: str | Path | None,
    strategies: Sequence[tuple[str, dict[str, Any]]],
    options: ReplayOptions | None = None,
    *,
    ceilings: Ceilings | None = None,
    py_spy_dir: Callable[[str], Path | None] | None = None,
    on_ceilings: Callable[[Ceilings], None] | None = None,
    log: Printer | None = None,
    **replay_kwargs: Any,
) -> StrategyRuns:
    """Replay each ``(strategy, params)`` in turn in the same cache mode, held against one set of ceilings: the
    first replay measures them (unless ``ceilings`` are given) and every later one reuses them. ``on_ceilings``
    receives them once measured (the CLI keeps them for later runs); ``py_spy_dir(name)`` says where each
    strategy's py-spy profiles go; the other keywords are ``replay``'s. Several strategies (or ``verify``) are
    compared side by side, in ``comparison`` and in the first session's ``strategies``. A Ctrl-C keeps what was
    measured: the series stops and says so."""
    return _replay_strategies(
        target,
        draft,
        strategies,
        options,
        ceilings=ceilings,
        py_spy_dir=py_spy_dir,
        on_ceilings=on_ceilings,
        log=log,
        **replay_kwargs,
    )
