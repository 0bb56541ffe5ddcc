"""The Python API: ``replay(...) -> Session``. It wires plan -> probes -> cache prep -> ranks -> analysis.

The CLI and the pytest plugin call this; nothing below it wires stages together.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptprof import interrupts
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.checkpoint import diskstats, fs
from ckptprof.engines import flags as sglang_flags
from ckptprof.loader import ranks as ranks_mod
from ckptprof.loader import torchrun
from ckptprof.loader.options import ReplayOptions, resolve, split_options
from ckptprof.loader.plan import ModelPlan, ReplayPlan, build_plan
from ckptprof.loader.progress import ProgressPrinter
from ckptprof.profiling.pyspy import PySpySession, native_supported
from ckptprof.profiling.sampler import KernelSampler, Window, merge_spans, storage_as_page_cache
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankResult, Session, ShardInfo
from ckptprof.stage_hooks import stage_begins

if TYPE_CHECKING:
    from ckptprof.results import StrategyComparison

Printer = Callable[[str], None]


def prepare_cache(model: ModelPlan, mode: str) -> tuple[int, str]:
    """Put the model's files in the asked-for cache state; returns (resident bytes now, what was done)."""
    files = model.files
    if mode == "cold":
        result = fs.drop_cache(files)
        note = result.note if result.ok else f"could not fully drop the page cache: {result.note}"
        return result.resident_bytes_after, note
    if mode == "warm":
        fs.warm_cache(files)
        resident = fs.total_resident_bytes(files)
        return (
            resident,
            f"warmed: read every byte once ({100 * resident / max(1, model.total_bytes):.0f}% resident)",
        )
    resident = fs.total_resident_bytes(files)
    return (
        resident,
        f"as-is: {100 * resident / max(1, model.total_bytes):.0f}% of the files were in the page cache",
    )


def environment() -> dict[str, Any]:
    import safetensors
    import torch

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "cuda_available": torch.cuda.is_available(),
        # How the decomposed pass faults pages in before timing the copy (ckptprof.loader.touch).
        "fault_in": os.environ.get("CKPTPROF_FAULT_IN", "populate") or "populate",
    }
    try:
        import psutil

        env["memory_bytes"] = psutil.virtual_memory().total
    except Exception:  # pragma: no cover - psutil is a dependency; keep the session even if it misbehaves
        pass
    if torch.cuda.is_available():
        env["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        env["cuda_version"] = torch.version.cuda
    return env


def _model_info(model: ModelPlan, resident: int | None, note: str) -> ModelInfo:
    return ModelInfo(
        role=model.role,
        path=model.path,
        fs_type=model.fs_type,
        total_bytes=model.total_bytes,
        shards=[ShardInfo(file=s.name, bytes=s.bytes, tensors=len(s.tensors or {})) for s in model.shards],
        resident_bytes_before=resident,
        cache_note=note,
    )


def _run_ranks(
    plan: ReplayPlan,
    faithful: bool,
    progress: bool,
    group: torchrun.TorchrunGroup | None,
    spy: PySpySession | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> list[RankResult] | None:
    label = "faithful: " if faithful else ""
    show = progress and (group is None or group.is_main)
    printer = ProgressPrinter(plan, label=label, enabled=show)
    try:
        if group is not None:
            if spy is not None:
                spy.attach(group.rank, os.getpid())
            return torchrun.run_joined(group, plan, faithful=faithful, progress=printer)
        return ranks_mod.run_spawned(
            plan, faithful=faithful, progress=printer, on_start=spy.attach if spy is not None else on_start
        )
    finally:
        printer.close()


def _collect_py_spy(session: Session, spy: PySpySession) -> None:
    import json

    from ckptprof.analysis.stacks import top_frames

    paths = spy.finish()
    session.artifacts["py_spy"] = {str(rank): path for rank, path in paths.items()}
    tops: dict[str, Any] = {}
    for rank, path in paths.items():
        try:
            tops[str(rank)] = top_frames(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            spy.errors[rank] = f"unreadable py-spy profile {path}: {exc}"
    session.extra["py_spy_top_frames"] = tops
    for rank, error in sorted(spy.errors.items()):
        session.notes.append(f"py-spy rank {rank}: {error}")


def _prepare_all(plan: ReplayPlan, group: torchrun.TorchrunGroup | None) -> list[tuple[int | None, str]]:
    """Cache prep happens once per node (the page cache is per node), then everyone waits for it."""
    if group is None or group.is_node_leader:
        states: list[tuple[int | None, str]] = [prepare_cache(m, plan.cache) for m in plan.models]
    else:
        states = [(None, "prepared by the node's local rank 0") for _ in plan.models]
    if group is not None:
        group.barrier()
    return states


# A faithful pass that fetched at most this fraction of what it loaded from its block device fetched nothing to speak
# of (a header page evicted): its threads' D states are waits on cached pages.
FETCHED_NOTHING = 0.01


def _faithful_passes(
    session: Session,
    plan: ReplayPlan,
    rounds: int,
    progress: bool,
    group: torchrun.TorchrunGroup | None,
    say: Printer,
    sample: bool = False,
) -> None:
    """SGLang's exact sequence, ``rounds`` times, with a decomposed pass (walls only) between two of them. With
    ``sample``, every rank's threads are sampled from the kernel while it runs SGLang's sequence unchanged."""
    faithful_walls: dict[tuple[int, str], list[float]] = {}
    decomposed_walls: dict[tuple[int, str], list[float]] = {
        (r.rank, m.role): [m.wall_s] for r in session.ranks for m in r.models
    }
    fetched: dict[tuple[int, str], int] = {}
    busy_fractions: dict[tuple[int, str], list[float]] = {}
    sampled: dict[tuple[int, str], Window] = {}
    copy_seconds: dict[tuple[int, str], list[float]] = {}
    disk_reads: dict[tuple[int, str], int] = {}
    engine: dict[int, RankResult] = {}  # each rank's first faithful result: the engine's import and output
    title = engine_title(session.config)
    # The block devices under the checkpoints, asked at each tick whether storage was busy at all.
    disks = [disk for disk in (diskstats.device_for(model.path) for model in plan.models) if disk]
    for i in range(rounds):
        _prepare_all(plan, group)
        say(
            f"faithful pass{f' {i + 1}/{rounds}' if rounds > 1 else ''}: {title}'s exact sequence, no decomposition ..."
        )
        sampler = KernelSampler([], disks=disks) if sample else None
        if sampler is not None:
            sampler.start()
        try:
            results = _run_ranks(
                plan,
                faithful=True,
                progress=progress,
                group=group,
                on_start=sampler.watch_rank if sampler is not None else None,
            )
        finally:
            if sampler is not None:
                sampler.stop()
        for r in results or []:
            if sampler is not None:
                _keep_samples(sampled, sampler, r)
            engine.setdefault(r.rank, r)
            for m in r.models:
                faithful_walls.setdefault((r.rank, m.role), []).append(m.wall_s)
                if m.copy_spans is not None:
                    copy_seconds.setdefault((r.rank, m.role), []).append(
                        sum(end - start for start, end in merge_spans(m.copy_spans))
                    )
                fetched.setdefault((r.rank, m.role), sum(s.storage_bytes for s in m.shards))
                if m.disk_read_bytes is not None:
                    disk_reads.setdefault((r.rank, m.role), m.disk_read_bytes)
                if m.disk_busy_s is not None and m.wall_s > 0:
                    busy_fractions.setdefault((r.rank, m.role), []).append(min(1.0, m.disk_busy_s / m.wall_s))
        if i < rounds - 1:
            _prepare_all(plan, group)
            say(f"decomposed pass {i + 2}/{rounds} (walls only) ...")
            for r in _run_ranks(plan, faithful=False, progress=progress, group=group) or []:
                for m in r.models:
                    decomposed_walls.setdefault((r.rank, m.role), []).append(m.wall_s)
    for r in session.ranks:
        first = engine.get(r.rank)
        if first is not None:
            r.engine_import_s, r.engine_output = first.engine_import_s, first.engine_output
        for m in r.models:
            m.faithful_disk_read_bytes = disk_reads.get((r.rank, m.role))
            walls = faithful_walls.get((r.rank, m.role))
            if not walls:
                continue
            m.faithful_wall_s = statistics.median(walls)
            m.faithful_storage_bytes = fetched.get((r.rank, m.role))
            fractions = busy_fractions.get((r.rank, m.role))
            if fractions and len(fractions) == len(walls):  # every pass sampled the device, or none counts
                m.faithful_disk_busy_s = statistics.median(fractions) * m.faithful_wall_s
            if rounds > 1:
                m.faithful_walls = walls
                m.decomposed_walls = decomposed_walls.get((r.rank, m.role))
            copies = copy_seconds.get((r.rank, m.role))
            if copies and len(copies) == len(walls):
                m.faithful_copy_s = statistics.median(copies)
            window = sampled.get((r.rank, m.role))
            if window is not None and window.counts:
                loaded = sum(sh.bytes for sh in m.shards)
                # The kernel counted (next to) no byte read from the block device in SGLang's pass: its D states
                # were waits on pages already in memory (ranks faulting the same page), not on storage.
                nothing = bool(m.disk) and (m.faithful_storage_bytes or 0) <= FETCHED_NOTHING * loaded
                m.faithful_sampled_shares = _rounded_shares(window.shares(), nothing)
                in_copies = window.copy_shares()
                if in_copies is not None:
                    m.faithful_sampled_copy_shares = _rounded_shares(in_copies, nothing)


def engine_title(config: dict[str, Any]) -> str:
    """The engine whose loading a session replays, as a person names it."""
    vllm = config.get("vllm_release") is not None or str(config.get("strategy", "")).startswith("vllm")
    return "vLLM" if vllm else "SGLang"


def _rounded_shares(shares: dict[str, float], fetched_nothing: bool) -> dict[str, float]:
    """Shares as saved: rounded, with storage counted as page cache when the pass fetched nothing from the device."""
    if fetched_nothing:
        shares = storage_as_page_cache(shares)
    return {k: round(v, 4) for k, v in shares.items()}


def _keep_samples(sampled: dict[tuple[int, str], Window], sampler: KernelSampler, rank: RankResult) -> None:
    """Each model's ticks: the rank's samples cut to the model's load (the host's monotonic clock is shared)."""
    seen = sampler.samples.get(rank.pid)
    if seen is None or rank.started_monotonic is None:
        return
    for m in rank.models:
        begin = rank.started_monotonic + m.start_s
        copies = (
            None
            if m.copy_spans is None
            else [
                (rank.started_monotonic + start, rank.started_monotonic + end) for start, end in m.copy_spans
            ]
        )
        sampled.setdefault((rank.rank, m.role), Window()).add(seen.between(begin, begin + m.wall_s), copies)


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

    Under torchrun (RANK / WORLD_SIZE set) this process is one rank; rank 0 returns the full session and the
    other ranks return a session holding only the plan's models and config.
    """
    say = log or (lambda _msg: None)
    o = resolve(options, overrides)
    if o.faithful_rounds < 1:
        raise ValueError(f"faithful_rounds must be at least 1, got {o.faithful_rounds}")
    faithful = o.faithful or o.faithful_rounds > 1 or o.sample_threads
    group = torchrun.TorchrunGroup() if torchrun.in_torchrun() else None
    if group is not None:
        if o.tp not in (1, group.world_size):
            raise ValueError(f"--tp {o.tp} does not match torchrun's WORLD_SIZE {group.world_size}")
        devices = o.devices
        if isinstance(devices, str) and devices.startswith("cuda") and devices in ("cuda", "cuda:local"):
            devices = (f"cuda:{group.local_rank}",)
        o = o.with_overrides(tp=group.world_size, devices=devices)
    tp, cache, probe = o.tp, o.cache, o.probe
    plan = build_plan(target, draft, o)
    if group is not None:
        # Every rank of a torchrun launch uses rank r's device mapping: device index = LOCAL_RANK.
        plan.devices = [plan.devices[group.local_rank % len(plan.devices)]]
    session = Session(
        config=plan.config(), created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    session.environment = environment()
    session.config["launcher"] = "torchrun" if group is not None else "spawn"
    if faithful:
        session.config["faithful_rounds"] = o.faithful_rounds
        session.config["sample_threads"] = o.sample_threads and group is None
        if o.sample_threads and group is not None:
            session.notes.append(
                "--sample-threads: not under torchrun (the ranks are not this process's children to watch)"
            )
        from ckptprof.loader.strategies.sglang_own import check_engine

        # The engine's own code when it is importable here (inside the serving container), else the replica: said.
        began = time.perf_counter()
        check = check_engine(plan, o.engine_iterator)
        plan.faithful_own, session.config["faithful_source"] = check.ok, check.text
        if check.identity is not None:
            session.config["faithful_engine"] = {
                **check.identity,
                "import_check_s": round(time.perf_counter() - began, 3),
            }

    from ckptprof.loader.strategies import get_strategy

    session.config["strategy_flags"] = get_strategy(o.strategy, **o.strategy_params).flags
    if plan.draft_strategy is not None:
        name, params = plan.strategy_for("draft")
        session.config["draft_strategy_flags"] = draft_flags(get_strategy(name, **params).flags)
        # What a server needs to load both models this way: the target's flags and the draft's.
        session.config["strategy_flags"] = " ".join(
            f for f in (session.config["strategy_flags"], session.config["draft_strategy_flags"]) if f
        )
    if sglang_release is not None:
        session.config["sglang_release"] = dict(sglang_release)
    if vllm_release is not None:
        session.config["vllm_release"] = dict(vllm_release)
    # Where the run is, so an interrupt at any point saves what exists and says what it cut short.
    stage = "probe"
    timer = _StageTimer(session)
    try:
        stage_begins("probe")
        if ceilings is not None:  # measured once for several strategies replayed in a row
            session.ceilings = ceilings
        elif probe and (group is None or group.is_main):
            _probe(session, plan, cache, o.probe_sample_bytes, progress, say)
        elif not probe:
            session.notes.append(
                "ceilings not measured (--no-probe): the verdict cannot quote achieved vs ceiling"
            )
        timer.lap("probe")
        stage = "cache preparation"
        stage_begins("cache")
        states = _prepare_all(plan, group)
        session.models = [
            _model_info(m, res, note) for m, (res, note) in zip(plan.models, states, strict=True)
        ]
        timer.lap("cache")
        stage = "replay"
        stage_begins("replay")
        say(f"replaying {len(plan.models)} model(s) on {tp} rank(s) over {len(plan.devices)} device(s) ...")
        spy = PySpySession(Path(py_spy_dir), native=native_supported()) if py_spy_dir is not None else None
        try:
            results = _run_ranks(plan, faithful=False, progress=progress, group=group, spy=spy)
        except BaseException:
            if spy is not None:
                spy.stop()
            raise
        if spy is not None:
            # In torchrun mode the recorder watches this very process: stop it rather than wait for our exit.
            if group is not None:
                spy.stop()
            _collect_py_spy(session, spy)
        if results is not None:  # None on a non-zero torchrun rank: rank 0 owns the session
            session.ranks = results
        timer.lap("replay")
        if faithful:
            # Every rank of a torchrun launch takes part in the faithful passes (they meet at barriers).
            stage = "faithful pass"
            stage_begins("faithful")
            _faithful_passes(
                session,
                plan,
                o.faithful_rounds,
                progress,
                group,
                say,
                sample=o.sample_threads and group is None,
            )
            timer.lap("faithful")
        if results is None:
            return session
    except (ranks_mod.Interrupted, KeyboardInterrupt) as exc:
        timer.lap(stage.split()[0])
        _keep_partial(session, plan, stage, exc)
        add_notes_and_verdict(session)
        raise InterruptedReplay(session) from None
    # A torchrun launch's process group stays up for the next replay of this process (`--strategy a,b` replays
    # each in turn; tearing the group down and up again between them raced the ranks' reconnection to rank 0).
    # It is destroyed when the process exits.
    add_notes_and_verdict(session)
    return session


class _StageTimer:
    """Wall seconds per stage in ``session.extra["stages_s"]``: what the probe costs next to the load."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        stages = self.session.extra.setdefault("stages_s", {})
        stages[name] = round(stages.get(name, 0.0) + now - self.last, 4)
        self.last = now


def _probe(
    session: Session, plan: ReplayPlan, cache: str, sample_bytes: int, progress: bool, say: Printer
) -> None:
    from ckptprof.probe.run_probes import measure_ceilings

    files = [f for m in plan.models for f in m.files]
    if cache == "as-is":
        # The storage probe drops and re-reads its sample: "as-is" means as found before ckptprof touched it.
        found = fs.total_resident_bytes(files)
        total = sum(f.stat().st_size for f in files) or 1
        session.notes.append(
            f"as-is: {100 * found / total:.0f}% of the checkpoint was in the page cache before the probes; "
            "the storage probe drops and re-reads a sample, so the replay may start from a different state "
            "(each model's cache note says what it found then; use --no-probe to keep the state untouched)"
        )
    say("measuring ceilings (storage, page cache, host-to-device) ...")
    # Filled as each ceiling is measured: an interrupted probe keeps the ones it finished.
    measured: dict[str, Any] = {}
    try:
        measure_ceilings(files, plan.devices, sample_bytes=sample_bytes, progress=progress, into=measured)
    finally:
        session.ceilings = Ceilings.from_dict(measured)


def _keep_partial(session: Session, plan: ReplayPlan, stage: str, exc: BaseException) -> None:
    """An interrupted replay keeps what it measured and says where it stopped."""
    how = interrupts.description()
    if isinstance(exc, ranks_mod.Interrupted):
        if stage == "replay":
            session.ranks = exc.results
        else:
            # The faithful pass was cut: the decomposed results stand, the faithful walls are incomplete.
            session.notes.append(
                "the faithful pass was interrupted: its walls are missing or partial, the decomposed pass is complete"
            )
    if not session.models:  # stopped before the cache was prepared: the models as planned, nothing found
        session.models = [
            _model_info(m, None, f"not prepared: interrupted during the {stage}") for m in plan.models
        ]
    if stage == "probe" and session.ceilings != Ceilings():
        cut = f"probe interrupted ({how}): only the ceilings measured before it are present"
        session.ceilings = dataclasses.replace(session.ceilings, notes=(*session.ceilings.notes, cut))
    session.extra["interrupted"] = {"stage": stage, "by": how}
    session.notes.append(f"interrupted ({how}) during the {stage}: partial session")


def draft_flags(flags: str) -> str:
    """A load-format strategy's flags as they select the draft's format (``--speculative-draft-load-format``)."""
    return sglang_flags.as_draft(flags)


class InterruptedReplay(Exception):
    def __init__(self, session: Session) -> None:
        super().__init__("interrupted")
        self.session = session


def add_notes_and_verdict(session: Session) -> None:
    """Notes that every report must carry, then the verdict."""
    devices = session.config.get("devices", [])
    if not any(str(d).startswith("cuda") for d in devices):
        session.notes.append(
            "no CUDA device: 'h2d' times are host-memory copies standing in for host-to-device transfers"
        )
    if session.config.get("ranks_share_devices"):
        session.notes.append(
            f"{session.config.get('tp')} ranks shared {len(devices)} device(s): copies of different ranks contend "
            "for the same link"
        )
    if session.config.get("cache") == "cold":
        dropped = [m for m in session.models if m.cache_note]
        session.notes.append(
            "cold cache: this run dropped the checkpoint's pages from the page cache before replaying "
            "(a server started next will read them from storage again)"
        )
        for m in dropped:
            if m.cache_note.startswith("could not"):
                session.notes.append(f"{m.role}: {m.cache_note}")
    failed = [r for r in session.ranks if r.status != "ok" or r.error]
    for r in failed:
        session.notes.append(f"rank {r.rank} ({r.device}): {r.status}: {r.error}")
    session.verdict = compute_verdict(session)


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
    """Replay each ``(strategy, params)`` in turn in the same cache mode, held against one set of ceilings: the
    first replay measures them (unless ``ceilings`` are given) and every later one reuses them. ``on_ceilings``
    receives them once measured (the CLI keeps them for later runs); ``py_spy_dir(name)`` says where each
    strategy's py-spy profiles go. Several strategies (or ``verify``) are compared side by side, in
    ``comparison`` and in the first session's ``strategies``. A Ctrl-C keeps what was measured: the series
    stops and says so."""
    say = log or (lambda _msg: None)
    option_overrides, rest = split_options(replay_kwargs)
    o = resolve(options, option_overrides)
    runs = StrategyRuns(sessions=[], ceilings=ceilings)
    for name, params in strategies:
        if len(strategies) > 1:
            say(f"strategy {name} ...")
        try:
            one = replay(
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
            if on_ceilings is not None and "interrupted" not in one.extra:
                on_ceilings(runs.ceilings)
        if runs.interrupted:
            break
    if runs.ceilings is not None and runs.sessions and not runs.interrupted and not torchrun.in_torchrun():
        learned = hold_probe_to_replays(runs.sessions, runs.ceilings, say)
        if learned is not runs.ceilings:
            runs.ceilings = learned
            for one in runs.sessions:
                one.ceilings = learned
                one.notes.extend(learned.notes[-1:])  # what the probe tried, where every report shows notes
                one.verdict = compute_verdict(one)  # held against the ceiling the probe should have measured
            if on_ceilings is not None:
                on_ceilings(learned)
    if runs.sessions and (len(runs.sessions) > 1 or o.verify):
        from ckptprof.analysis.strategies import compare_strategies

        runs.comparison = compare_strategies(runs.sessions)
        runs.sessions[0].strategies = runs.comparison
    return runs


def hold_probe_to_replays(sessions: Sequence[Session], ceilings: Ceilings, say: Printer) -> Ceilings:
    """The storage probe is a ceiling: when a replay fetched from storage faster than it (beyond the noise), the
    probe measures again with other settings until it holds (probe/learn.py); else ``ceilings`` unchanged."""
    from ckptprof.analysis.strategies import strategy_label
    from ckptprof.probe import learn

    rates = [
        (s.verdict.fetched_GBps or 0.0, strategy_label(s.config))
        for s in sessions
        if s.ok and s.verdict is not None and not s.verdict.incomplete
    ]
    fastest, label = max(rates, default=(0.0, ""))
    probe = ceilings.storage_read_GBps
    if not probe or fastest <= learn.TOLERANCE * probe:
        return ceilings
    files = checkpoint_files(sessions[0])
    if not files:
        return ceilings
    say(
        f"{label} fetched from storage at {fastest:.2f} GB/s, above the probe's {probe:.2f}: measuring the storage again"
    )
    try:
        measure, direct_ok = learn.disk_measure(files)
        return learn.learn(ceilings, fastest, label, measure, direct_ok)
    except OSError as exc:
        note = f"{label} read faster than the storage probe, which could not measure again ({exc})"
        return dataclasses.replace(ceilings, notes=(*ceilings.notes, note))


def checkpoint_files(session: Session) -> list[Path] | None:
    """The session's shard files as SGLang finds them; None when they cannot be listed here."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.errors import CheckpointError

    try:
        return [path for model in session.models for path in discover(Path(model.path)).files]
    except (CheckpointError, OSError):
        return None
