"""One run from its resolved configuration to its sessions: the checkpoint, the probe (or a recent one reused),
every strategy's replay, the notes the policy owes the reader, and the checked predictions.

It prints nothing itself and writes no file: ``say`` gets the stages, ``progress`` draws the bars. The CLI saves
and prints what comes back; the Python API returns it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptprof import inprogress, interrupts
from ckptprof.analysis.server_log import server_vs_replay
from ckptprof.devices import default_device_spec, parse_devices
from ckptprof.errors import CkptprofError
from ckptprof.loader import rank_start, torchrun
from ckptprof.loader.options import COLD_THEN_WARM, DEFAULT_RANK_TIMEOUT_S, ReplayOptions
from ckptprof.results import Ceilings
from ckptprof.run import cache_state, referee, stages
from ckptprof.run.builtin import builtin_checkpoint
from ckptprof.run.policy import Printer, RunConfig, Spec
from ckptprof.run.request import RunRequest
from ckptprof.session import Session
from ckptprof.stage_hooks import stage_begins

if TYPE_CHECKING:
    from ckptprof.probe.reuse import Reused
    from ckptprof.results import StrategyComparison


@dataclass
class RunOutcome:
    """What one run produced. ``session`` is the first strategy's (the one the summary prints); ``sessions`` holds
    every strategy's in the order replayed."""

    sessions: list[Session]
    comparison: StrategyComparison | None
    interrupted: bool
    is_rank0: bool
    unchecked: str | None = None
    """Why ``check_predictions`` was asked for and nothing could be checked (None: it was not asked, or it ran)."""

    @property
    def session(self) -> Session:
        return self.sessions[0]


def rank_timeout_s(request: RunRequest) -> float:
    """The rank timeout in force: the request's, else ``$CKPTPROF_RANK_TIMEOUT_S``, else 1800 s (0: never). A hang
    (a stuck NFS server, a wedged driver) must end the run, not the user's patience."""
    if request.rank_timeout_s is not None:
        return request.rank_timeout_s
    return float(os.environ.get("CKPTPROF_RANK_TIMEOUT_S") or DEFAULT_RANK_TIMEOUT_S)


def recent_probe(
    request: RunRequest, target: str | Path, devices: str | tuple[str, ...]
) -> tuple[dict[str, object] | None, Reused | None]:
    """(the key this run's probe would be stored under, a reusable recent probe or None). No key when the
    checkpoint cannot be listed here: the replay then reports that problem itself."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.probe import reuse

    try:
        max_age = request.probe_max_age_s if request.probe_max_age_s is not None else reuse.max_age_from_env()
        files = [f for p in (target, request.draft) if p for f in discover(Path(p)).files]
        names = list(devices) if isinstance(devices, tuple) else parse_devices(devices)
        key = reuse.probe_key(files, names, request.probe_sample_bytes, cache=request.first_cache)
    except (CkptprofError, OSError, ValueError):
        return None, None
    if request.reprobe:
        return key, None
    found = reuse.lookup(key, max_age)
    if found is None:
        return key, None
    reused = {"measured_at": found.measured_at, "age_s": round(found.age_s, 1), "max_age_s": max_age}
    return key, dataclasses.replace(found, ceilings={**found.ceilings, "reused": reused})


def checkpoint_paths(target: str | Path, draft: str | Path | None) -> list[Path]:
    """The shard files of the target and the draft as the loader finds them."""
    from ckptprof.checkpoint.discovery import discover

    return [Path(f) for p in (target, draft) if p for f in discover(Path(p)).files]


def probe_origin(target: str | Path, draft: str | Path | None, ceilings: Ceilings) -> str:
    """What a kept probe read, for the note of a run that reuses it: 'a 16.00 MB sample of /data/ckpt (ext4 mount
    27 of /dev/vda at /)'."""
    from ckptprof.checkpoint import fs
    from ckptprof.units import human_bytes

    where = " and ".join(str(p) for p in (target, draft) if p)
    mount = fs.mount_identity(target)
    sample = ceilings.storage_sample_bytes
    read = f"a {human_bytes(sample)} sample of " if sample else ""
    return f"{read}{where}" + (f" ({mount.describe()})" if mount is not None else "")


def vllm_strategies(
    release: dict[str, object], target: str | Path, strategies: list[Spec], defaulted: bool
) -> tuple[list[Spec], Callable[[list[Session]], str]]:
    """vLLM's automatic-prefetch rule applied to this checkpoint here: the strategies to replay (without
    --strategy: the path vLLM takes here, then the other side of the rule) and the note that says what it does.
    The decision is written into ``release`` (it is saved with the session's config)."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.engines import vllm

    profile = vllm.profile_named(str(release.get("profile"))) or vllm.NEWEST
    files = [Path(f) for f in discover(target).files]
    decision = vllm.checkpoint_decision(profile, files)
    release["prefetch_decision"] = decision.to_dict()
    if defaulted:
        reference = [item for item in strategies if item[0] == "sglang"]  # --verify's reference stays first
        strategies = reference + vllm.default_strategies(decision)

    def note(sessions: list[Session]) -> str:
        walls = {
            str(one.config.strategy): one.verdict.load_wall_s
            for one in sessions
            if one.verdict is not None
            and one.verdict.load_wall_s is not None
            and not one.verdict.incomplete
            and not one.config.strategy_params
        }
        cache = (sessions[0].config.cache or "as-is") if sessions else "as-is"
        return vllm.prefetch_note(profile, decision, walls, cache)

    return strategies, note


def execute(config: RunConfig, say: Printer | None = None, progress: bool = False) -> RunOutcome:
    """Run what ``config`` resolved: every strategy in turn against one probe, then the checked predictions.

    The run is listed as in progress (``ckptprof.inprogress``) while it lasts, so that other runs can tell that
    they measured beside it."""
    request = config.request
    paths = [str(p) for p in (request.target, request.draft) if p]
    if not config.is_rank0:
        return _execute(config, say, progress)
    with inprogress.registered("run", paths, request.cache):
        return _execute(config, say, progress)


def shared_options(config: RunConfig, devices: str | tuple[str, ...]) -> dict[str, Any]:
    """What every replay of this run shares: the main strategies and the checked recommendations alike."""
    request = config.request
    return {
        "tp": request.tp,
        "devices": devices,
        "cache": request.cache,
        "order": config.order,
        "allow_pickle": request.allow_pickle,
        "faithful": request.faithful,
        "faithful_rounds": request.faithful_rounds,
        "engine_iterator": request.engine_iterator,
        "sample_threads": request.sample_threads,
        "draft_strategy": config.draft_spec[0] if config.draft_spec else None,
        "draft_strategy_params": config.draft_spec[1] if config.draft_spec else None,
        "expert_parallel": request.expert_parallel,
        "rank_timeout_s": rank_timeout_s(request),
    }


def warm_rank_server() -> None:
    """Start the ranks' fork server, which imports torch on another core while the run goes on
    (ckptprof.loader.rank_start); a torchrun launch starts no rank of its own."""
    if not torchrun.in_torchrun():
        rank_start.warm()


def _execute(config: RunConfig, say: Printer | None, progress: bool) -> RunOutcome:
    from ckptprof.run import strategies as series

    request = config.request
    warm_rank_server()
    tell = say or (lambda _msg: None)
    is_rank0 = config.is_rank0
    target = request.target or builtin_checkpoint(request.synth_size, quiet=not progress or not is_rank0)
    devices = request.devices or default_device_spec()
    if request.py_spy_dir is not None:
        from ckptprof.profiling.pyspy import check_available

        check_available()
    replay_options = shared_options(config, devices)
    release = dict(config.release)
    strategies = list(config.strategies)
    vllm_rule = None
    if config.engine == "vllm":
        # Without --strategy (and no load format the server's log shows): both sides of vLLM's prefetch rule.
        server_log = config.server_log
        defaulted = not request.strategy and not (server_log is not None and server_log.strategy_from_log)
        strategies, vllm_rule = vllm_strategies(release, target, strategies, defaulted)
        tell(f"replaying {release['description']} (profile chosen by {release['why']})")
    release_kwargs: dict[str, Any] = {"vllm_release" if vllm_rule is not None else "sglang_release": release}
    probe_key = None
    reused = None
    if request.probe and is_rank0:
        probe_key, reused = recent_probe(request, target, devices)

    def keep_probe(ceilings: Ceilings) -> None:
        if probe_key is not None:
            from ckptprof.probe import reuse

            reuse.store(probe_key, ceilings.to_dict(), origin=probe_origin(target, request.draft, ceilings))

    dropped_beside = None
    if request.first_cache == "cold" and is_rank0:
        # A cold run's drop evicts these files for every run reading them: warm runs on them first get a chance
        # to end, and are named when they did not.
        dropped_beside = cache_state.before_dropping([p for p in (target, request.draft) if p], tell)
    if request.cache == COLD_THEN_WARM and is_rank0:
        referee.check_cold_possible(checkpoint_paths(target, request.draft))
    py_spy = Path(request.py_spy_dir) if request.py_spy_dir is not None else None
    runs = series.replay_strategies(
        target,
        request.draft,
        strategies,
        ceilings=Ceilings.from_dict(reused.ceilings) if reused is not None else None,
        py_spy_dir=(lambda name: py_spy if len(strategies) == 1 else py_spy / f"py-spy-{name}")
        if py_spy is not None
        else None,
        on_ceilings=keep_probe,
        log=tell,
        **replay_options,
        verify=request.verify,
        probe=request.probe,
        probe_sample_bytes=request.probe_sample_bytes,
        progress=progress and is_rank0,
        **release_kwargs,
    )
    sessions = runs.sessions
    _add_run_notes(sessions, runs.ceilings, reused, dropped_beside, vllm_rule)
    sessions[0].server_log = config.server_log
    # The server-versus-replay rows travel in the session itself (session.json, --json), not only in its views.
    sessions[0].extra.server_vs_replay = server_vs_replay(sessions[0])
    outcome = RunOutcome(
        sessions=sessions, comparison=runs.comparison, interrupted=runs.interrupted, is_rank0=is_rank0
    )
    if request.check_predictions and not outcome.interrupted:
        # A checked flag is one load, in the run's first cache state (cold, for a cold-then-warm run).
        replay_one = functools.partial(
            stages.run_stages,
            target,
            request.draft,
            **release_kwargs,
            progress=progress and is_rank0,
            log=tell,
            **{**replay_options, "cache": request.first_cache},
            ceilings=runs.ceilings,
            probe=False,
        )
        _check_predictions(outcome, replay_one, tell)
    return outcome


def _add_run_notes(
    sessions: list[Session],
    ceilings: Ceilings | None,
    reused: Reused | None,
    dropped_beside: str | None,
    vllm_rule: Callable[[list[Session]], str] | None,
) -> None:
    """What the run owes every session's reader: a warm cache lost under it, a drop beside other runs, vLLM's
    prefetch rule, the reused probe (first) or the crowding the probe saw."""
    for one in sessions:
        cache_state.changed_under_warm_run(one)
        if dropped_beside is not None:
            one.notes.append(dropped_beside)
    if vllm_rule is not None and sessions:
        sessions[0].notes.append(vllm_rule(sessions))
    if reused is not None:
        for one in sessions:
            one.notes.insert(0, reused.note())
    elif ceilings is not None:
        from ckptprof.probe import contention

        crowded = [n for n in ceilings.notes if contention.is_contended([n])]
        for one in sessions:
            one.notes.extend(n for n in crowded if n not in one.notes)


def _check_predictions(outcome: RunOutcome, replay_one: Callable[..., Session], say: Printer) -> None:
    """``--check-predictions``: each recommended flag set replayed and held to its prediction, or why none was."""
    from ckptprof.run.interrupted import InterruptedReplay
    from ckptprof.run.predictions import check_recommendations, nothing_to_check

    session = outcome.session
    try:
        stage_begins("check")
        outcome.unchecked = nothing_to_check(session)
        if outcome.unchecked is not None:
            session.notes.append(f"--check-predictions: nothing was checked: {outcome.unchecked}")
        else:
            check_recommendations(session, replay_one, say)
    except (InterruptedReplay, KeyboardInterrupt):
        session.notes.append(
            f"interrupted ({interrupts.description()}) while checking the predictions: not all were checked"
        )
        outcome.unchecked, outcome.interrupted = None, True


def run_request(
    request: RunRequest | None = None,
    *,
    say: Printer | None = None,
    progress: bool = False,
    **fields: Any,
) -> RunOutcome:
    """``ckptprof run`` from Python, every strategy's session: the same policy, defaults and sessions as the
    command line. ``request`` (or its fields as keywords, which win) says what to run; ``say`` gets the stages and
    ``progress`` draws the bars. Nothing is printed or saved."""
    from ckptprof.run.policy import resolve

    asked = (request or RunRequest()).with_fields(**fields)
    return execute(resolve(asked), say=say, progress=progress)


def replay(
    target: str | Path | None = None,
    draft: str | Path | None = None,
    options: ReplayOptions | None = None,
    *,
    say: Printer | None = None,
    progress: bool = False,
    **fields: Any,
) -> Session:
    """``ckptprof.replay("/data/eagle3", cache="cold", tp=8)``: the session ``ckptprof run /data/eagle3 --cache cold
    --tp 8`` saves (the first strategy's, holding the side-by-side comparison when several ran).

    The keywords are ``RunRequest``'s fields (``ckptprof/run/request.py``), spelled as the flags are:
    ``strategy="sglang-mt:num_threads=16"``, ``server_log="server.log"``, ``faithful=True``. Left out, each takes
    the command line's default (the installed or newest release's path and order, the page cache as it is,
    cuda when present, a 1,800 s rank timeout). ``options``, a ``ReplayOptions``, is a complete set of choices
    instead (its own defaults included: a warm cache, the ``sglang`` path); keywords still win over it. The stage
    runner, which applies no policy at all, is ``ckptprof.api.replay`` (``ckptprof.run.stages``).
    """
    if options is not None:
        asked = RunRequest.from_options(target, draft, options)
    else:
        asked = RunRequest(target=target, draft=draft)
    return run_request(asked, say=say, progress=progress, **fields).session
