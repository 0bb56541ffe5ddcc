"""The stage runner: one replay of a plan, stage by stage - probe -> cache -> ranks -> faithful passes -> notes and
verdict - into one analysed session. It applies no policy (``ckptprof.run.policy`` does, before it), prints only
through ``say`` and writes no file. An interrupt at any stage keeps what exists (``run.interrupted``).

Under torchrun (RANK / WORLD_SIZE set) this process is one rank; rank 0 returns the full session and the other
ranks return a session holding only the plan's models and config.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ckptprof.loader import ranks as ranks_mod
from ckptprof.loader import torchrun
from ckptprof.loader.options import COLD_THEN_WARM, ReplayOptions, resolve
from ckptprof.loader.plan import ReplayPlan, build_plan
from ckptprof.profiling.pyspy import PySpySession, native_supported
from ckptprof.results import Ceilings
from ckptprof.run import referee
from ckptprof.run.cache_prep import model_info, prepare_all
from ckptprof.run.ceilings import probe_ceilings
from ckptprof.run.environment import environment
from ckptprof.run.faithful import faithful_passes
from ckptprof.run.interrupted import InterruptedReplay, keep_partial
from ckptprof.run.notes import add_notes_and_verdict, draft_flags
from ckptprof.run.passes import collect_py_spy, run_ranks
from ckptprof.session import RankResult, Session
from ckptprof.session_config import FaithfulEngine
from ckptprof.stage_hooks import stage_begins

Printer = Callable[[str], None]


def run_stages(
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
    """One replay of ``target`` (and ``draft``) as ``options`` (and the keyword ``overrides``, which win) say; the
    arguments are ``ckptprof.api.replay``'s."""
    o = resolve(options, overrides)
    if o.faithful_rounds < 1:
        raise ValueError(f"faithful_rounds must be at least 1, got {o.faithful_rounds}")
    warm_referee = o.cache == COLD_THEN_WARM
    if warm_referee:
        o = o.with_overrides(cache="cold")  # the load is the cold one; the warm pass referees it
    group = torchrun.TorchrunGroup() if torchrun.in_torchrun() else None
    if warm_referee and group is not None:
        raise ValueError(f"cache={COLD_THEN_WARM!r} runs with spawned ranks, not under torchrun")
    o = fit_to_launch(o, group)
    plan = build_plan(target, draft, o)
    if group is not None:
        # Every rank of a torchrun launch uses rank r's device mapping: device index = LOCAL_RANK.
        plan.devices = [plan.devices[group.local_rank % len(plan.devices)]]
    session = new_session(plan, o, group, sglang_release, vllm_release)
    stages = Stages(session, plan, o, group, progress=progress, say=log or (lambda _msg: None))
    stages.warm_referee = warm_referee
    return stages.run(ceilings, Path(py_spy_dir) if py_spy_dir is not None else None)


def fit_to_launch(o: ReplayOptions, group: torchrun.TorchrunGroup | None) -> ReplayOptions:
    """Under torchrun the launch decides the rank count and each process's device."""
    if group is None:
        return o
    if o.tp not in (1, group.world_size):
        raise ValueError(f"--tp {o.tp} does not match torchrun's WORLD_SIZE {group.world_size}")
    devices = o.devices
    if isinstance(devices, str) and devices in ("cuda", "cuda:local"):
        devices = (f"cuda:{group.local_rank}",)
    return o.with_overrides(tp=group.world_size, devices=devices)


def wants_faithful(o: ReplayOptions) -> bool:
    """Whether the run replays the engine's exact sequence too (asked, or implied by rounds or sampling)."""
    return o.faithful or o.faithful_rounds > 1 or o.sample_threads


def new_session(
    plan: ReplayPlan,
    o: ReplayOptions,
    group: torchrun.TorchrunGroup | None,
    sglang_release: dict[str, Any] | None,
    vllm_release: dict[str, Any] | None,
) -> Session:
    """A session holding the run's configuration, before anything is measured."""
    session = Session(
        config=plan.config(), created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    session.environment = environment()
    session.config.launcher = "torchrun" if group is not None else "spawn"
    if wants_faithful(o):
        _faithful_config(session, plan, o, group)
    _strategy_flags(session, plan, o)
    if sglang_release is not None:
        session.config.sglang_release = dict(sglang_release)
    if vllm_release is not None:
        session.config.vllm_release = dict(vllm_release)
    return session


def _faithful_config(
    session: Session, plan: ReplayPlan, o: ReplayOptions, group: torchrun.TorchrunGroup | None
) -> None:
    """The faithful passes' settings, and whose code runs them (the engine's own where it imports here)."""
    from ckptprof.loader.strategies.sglang_own import check_engine

    session.config.faithful_rounds = o.faithful_rounds
    session.config.sample_threads = o.sample_threads and group is None
    if o.sample_threads and group is not None:
        session.notes.append(
            "--sample-threads: not under torchrun (the ranks are not this process's children to watch)"
        )
    # The engine's own code when it is importable here (inside the serving container), else the replica: said.
    began = time.perf_counter()
    check = check_engine(plan, o.engine_iterator)
    plan.faithful_own, session.config.faithful_source = check.ok, check.text
    identity = check.identity
    if identity is not None:
        stand_ins = identity.get("stand_ins")
        session.config.faithful_engine = FaithfulEngine(
            package=identity.get("package"),
            version=identity.get("version"),
            module=identity.get("module"),
            file=identity.get("file"),
            import_check_s=round(time.perf_counter() - began, 3),
            import_check_reused=True if identity.get("import_check_reused") else None,
            stand_ins=list(stand_ins) if stand_ins else None,
        )


def _strategy_flags(session: Session, plan: ReplayPlan, o: ReplayOptions) -> None:
    """The server flags that select the replayed path(s): the target's, and the draft's own format."""
    from ckptprof.loader.strategies import get_strategy

    session.config.strategy_flags = get_strategy(o.strategy, **o.strategy_params).flags
    if plan.draft_strategy is not None:
        name, params = plan.strategy_for("draft")
        session.config.draft_strategy_flags = draft_flags(get_strategy(name, **params).flags)
        # What a server needs to load both models this way: the target's flags and the draft's.
        session.config.strategy_flags = " ".join(
            f for f in (session.config.strategy_flags, session.config.draft_strategy_flags) if f
        )


class StageTimer:
    """Wall seconds per stage in ``session.extra.stages_s``: what the probe costs next to the load."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        stages = self.session.extra.stages_s
        if stages is None:
            stages = self.session.extra.stages_s = {}
        stages[name] = round(stages.get(name, 0.0) + now - self.last, 4)
        self.last = now


class Stages:
    """The stages of one replay in order; ``stage`` names the one running, for an interrupt to say where."""

    def __init__(
        self,
        session: Session,
        plan: ReplayPlan,
        o: ReplayOptions,
        group: torchrun.TorchrunGroup | None,
        progress: bool,
        say: Printer,
    ) -> None:
        self.session, self.plan, self.o, self.group = session, plan, o, group
        self.progress, self.say = progress, say
        self.stage = "probe"
        self.timer = StageTimer(session)
        self.warm_referee = False
        """After the load, the same load from a warm page cache (``cache="cold,warm"``)."""

    def run(self, ceilings: Ceilings | None, py_spy_dir: Path | None) -> Session:
        session = self.session
        try:
            self.probe(ceilings)
            self.prepare_cache()
            results = self.replay(py_spy_dir)
            if wants_faithful(self.o):
                self.faithful()
            warm = self.warm_pass() if self.warm_referee else None
            if results is None:  # a torchrun rank other than 0: rank 0 owns the session
                return session
        except (ranks_mod.Interrupted, KeyboardInterrupt) as exc:
            self.timer.lap(self.stage.split()[0])
            keep_partial(session, self.plan, self.stage, exc)
            add_notes_and_verdict(session)
            raise InterruptedReplay(session) from None
        # A torchrun launch's process group stays up for the next replay of this process (`--strategy a,b` replays
        # each in turn; tearing the group down and up again between them raced the ranks' reconnection to rank 0).
        # It is destroyed when the process exits.
        add_notes_and_verdict(session, warmed_again=warm is not None)
        if warm is not None:
            referee.attach(session, warm)
        return session

    def probe(self, ceilings: Ceilings | None) -> None:
        self.stage = "probe"
        stage_begins("probe")
        o, session = self.o, self.session
        if ceilings is not None:  # measured once for several strategies replayed in a row
            session.ceilings = ceilings
        elif o.probe and (self.group is None or self.group.is_main):
            probe_ceilings(session, self.plan, o.cache, o.probe_sample_bytes, self.progress, self.say)
        elif not o.probe:
            session.notes.append(
                "ceilings not measured (--no-probe): the verdict cannot quote achieved vs ceiling"
            )
        self.timer.lap("probe")

    def prepare_cache(self) -> None:
        self.stage = "cache preparation"
        stage_begins("cache")
        states = prepare_all(self.plan, self.group)
        self.session.models = [
            model_info(m, res, note) for m, (res, note) in zip(self.plan.models, states, strict=True)
        ]
        self.timer.lap("cache")

    def replay(self, py_spy_dir: Path | None) -> list[RankResult] | None:
        """The decomposed pass; its results become the session's ranks (None on a torchrun rank other than 0)."""
        self.stage = "replay"
        stage_begins("replay")
        plan, group = self.plan, self.group
        self.say(
            f"replaying {len(plan.models)} model(s) on {plan.tp} rank(s) over {len(plan.devices)} device(s) ..."
        )
        spy = PySpySession(py_spy_dir, native=native_supported()) if py_spy_dir is not None else None
        try:
            results = run_ranks(plan, faithful=False, progress=self.progress, group=group, spy=spy)
        except BaseException:
            if spy is not None:
                spy.stop()
            raise
        if spy is not None:
            # In torchrun mode the recorder watches this very process: stop it rather than wait for our exit.
            if group is not None:
                spy.stop()
            collect_py_spy(self.session, spy)
        if results is not None:
            self.session.ranks = results
        self.timer.lap("replay")
        return results

    def faithful(self) -> None:
        # Every rank of a torchrun launch takes part in the faithful passes (they meet at barriers).
        self.stage = "faithful pass"
        stage_begins("faithful")
        o = self.o
        faithful_passes(
            self.session,
            self.plan,
            o.faithful_rounds,
            self.progress,
            self.group,
            self.say,
            sample=o.sample_threads and self.group is None,
        )
        self.timer.lap("faithful")

    def warm_pass(self) -> Session:
        """The same load again from a warm page cache, with the same plan and ranks' settings: the referee of the
        cold load (``--cache cold,warm``). Its session is analysed on its own; the cold one keeps its figures."""
        self.stage = "warm pass"
        stage_begins("warm")
        o, session = self.o, self.session
        plan = dataclasses.replace(self.plan, cache="warm")
        warm = Session(config={**session.config, "cache": "warm"}, created=session.created)
        warm.environment, warm.ceilings = session.environment, session.ceilings
        states = prepare_all(plan, self.group)
        warm.models = [model_info(m, res, note) for m, (res, note) in zip(plan.models, states, strict=True)]
        self.say("warm pass: the same load from a warm page cache (the referee of the cold one) ...")
        warm.ranks = run_ranks(plan, faithful=False, progress=self.progress, group=self.group) or []
        if wants_faithful(o):
            sample = o.sample_threads and self.group is None
            faithful_passes(warm, plan, o.faithful_rounds, self.progress, self.group, self.say, sample=sample)
        add_notes_and_verdict(warm)
        self.timer.lap("warm")
        return warm
