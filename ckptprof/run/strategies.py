"""Several loading paths replayed in turn in the same cache mode, held against one set of ceilings, and compared
side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.loader import torchrun
from ckptprof.loader.options import ReplayOptions, resolve, split_options
from ckptprof.results import Ceilings
from ckptprof.run import stages
from ckptprof.run.ceilings import hold_probe_to_replays
from ckptprof.run.interrupted import InterruptedReplay
from ckptprof.session import Session

if TYPE_CHECKING:
    from ckptprof.results import StrategyComparison

Printer = Callable[[str], None]


@dataclass
class StrategyRuns:
    """What ``replay_strategies`` did: one session per strategy replayed (in order), the ceilings they share, and
    whether an interrupt cut the series short (the sessions then hold what was measured)."""

    sessions: list[Session]
    ceilings: Ceilings | None
    interrupted: bool = False
    # Side by side (several strategies, or one verified against SGLang's values); also in sessions[0].extra.
    comparison: StrategyComparison | None = None


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
    """Every ``(strategy, params)`` in turn; the arguments are ``ckptprof.api.replay_strategies``'s."""
    say = log or (lambda _msg: None)
    option_overrides, rest = split_options(replay_kwargs)
    o = resolve(options, option_overrides)
    runs = StrategyRuns(sessions=[], ceilings=ceilings)
    for name, params in strategies:
        if len(strategies) > 1:
            say(f"strategy {name} ...")
        try:
            one = stages.run_stages(
                target,
                draft,
                o,
                strategy=name,
                strategy_params=params,
                ceilings=runs.ceilings,
                py_spy_dir=py_spy_dir(name) if py_spy_dir is not None else None,
                log=log,
                **rest,
            )
        except InterruptedReplay as exc:
            one = exc.session
            runs.interrupted = True
        except KeyboardInterrupt:
            # Before this replay had a session (reading the headers): nothing of it was measured.
            if not runs.sessions:
                raise
            runs.interrupted = True
            break
        runs.sessions.append(one)
        if o.probe and runs.ceilings is None:
            runs.ceilings = one.ceilings  # measure the hardware once; every strategy is held against it
            if on_ceilings is not None and one.extra.interrupted is None:
                on_ceilings(runs.ceilings)
        if runs.interrupted:
            break
    if runs.ceilings is not None and runs.sessions and not runs.interrupted and not torchrun.in_torchrun():
        _learn_from_replays(runs, on_ceilings, say)
    if runs.sessions and (len(runs.sessions) > 1 or o.verify):
        from ckptprof.analysis.strategies import compare_strategies

        runs.comparison = compare_strategies(runs.sessions)
        runs.sessions[0].strategies = runs.comparison
    return runs


def _learn_from_replays(
    runs: StrategyRuns, on_ceilings: Callable[[Ceilings], None] | None, say: Printer
) -> None:
    """A replay that fetched faster than the storage probe sends the probe back to measure (``hold_probe_to_replays``);
    every session is then held against what it measured."""
    assert runs.ceilings is not None
    learned = hold_probe_to_replays(runs.sessions, runs.ceilings, say)
    if learned is runs.ceilings:
        return
    runs.ceilings = learned
    for one in runs.sessions:
        one.ceilings = learned
        one.notes.extend(learned.notes[-1:])  # what the probe tried, where every report shows notes
        one.verdict = compute_verdict(one)  # held against the ceiling the probe should have measured
    if on_ceilings is not None:
        on_ceilings(learned)
