"""pytest plugin: the ``ckptprof_replay`` fixture, for loading-time regression tests with pytest-benchmark.

    def test_boot(benchmark, ckptprof_replay):
        ckptprof_replay(benchmark, "/data/eagle3/ckpt", cache="cold", tp=8, devices="cuda")

The ranks are started once, before the first round, and kept (``ckptprof.loader.resident``). Each round's setup
(not timed) has every rank allocate and prepare up to its start line and puts the cache in the asked-for state
(cold: the checkpoint's pages dropped and the drop verified); the timed part releases the ranks and ends when the
last rank's result is in, so pytest-benchmark times the load. Every round's figures are kept in
``extra_info["rounds"]``, their medians at the top of ``extra_info``. ``--ckptprof-compare-fail=h2d_s:10%``
(with ``--benchmark-compare``) fails a test whose median of that phase regressed against the baseline's.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The per-round figures; the medians of those that are numbers go to the top of extra_info.
SECONDS = (
    "load_wall_s",
    "read_s",
    "deserialize_s",
    "h2d_s",
    "other_s",
    "span_s",
    "overhead_s",
    "start_s",
    "gather_s",
)
RATES = ("GBps",)  # lower is worse
GATED = SECONDS + RATES


class FixtureProblem(Exception):
    """Why the fixture cannot benchmark: shown as the test's one-line failure."""


@dataclass(frozen=True)
class PhaseGate:
    """``--ckptprof-compare-fail=PHASE:PCT%``: fail when this run's median of PHASE is worse than the baseline's by
    more than PCT percent (seconds: higher, GBps: lower)."""

    phase: str
    percent: float

    @classmethod
    def parse(cls, text: str) -> PhaseGate:
        phase, _, limit = text.partition(":")
        if phase not in GATED:
            raise pytest.UsageError(
                f"--ckptprof-compare-fail {text}: the phase must be one of {', '.join(GATED)}"
            )
        try:
            percent = float(limit.removesuffix("%"))
        except ValueError:
            percent = -1.0
        if not limit.endswith("%") or percent < 0:
            raise pytest.UsageError(
                f"--ckptprof-compare-fail {text}: the limit must be a percentage, e.g. 10%"
            )
        return cls(phase, percent)

    def failure(self, now: float | None, base: float | None, source: str) -> str | None:
        if now is None or base is None or base <= 0:
            return None
        change = 100.0 * (now - base) / base
        unit = " s" if self.phase in SECONDS else " GB/s"
        if self.phase in RATES:
            if -change <= self.percent:
                return None
            how = f"{-change:.1f}% below"
        else:
            if change <= self.percent:
                return None
            how = f"{change:.1f}% above"
        return f"{self.phase} median {now:.4f}{unit} is {how} {base:.4f}{unit} in {source} (limit {self.percent:g}%)"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ckptprof")
    group.addoption(
        "--ckptprof-compare-fail",
        action="append",
        default=[],
        metavar="PHASE:PCT%",
        help="with --benchmark-compare: fail a ckptprof_replay test whose median PHASE regressed by more than PCT "
        f"against the baseline's ({', '.join(GATED)}); repeatable",
    )


def pytest_configure(config: pytest.Config) -> None:
    gates = [PhaseGate.parse(text) for text in config.getoption("ckptprof_compare_fail", None) or []]
    if gates and not config.getoption("benchmark_compare", None):
        raise pytest.UsageError(
            "--ckptprof-compare-fail requires --benchmark-compare (the baseline it compares to)"
        )


@dataclass
class _Round:
    """One timed round as it was taken: the models' cache state, the ranks' results, the seconds pytest-benchmark
    timed (near enough: the same call, timed inside) and, on the monotonic clock, the go and the moment the last rank
    said it had loaded its last shard."""

    models: list[Any]
    results: list[Any]
    timed_s: float
    released_at: float
    answered_at: float


def _figures(session: Any, one: _Round) -> dict[str, Any]:
    from ckptprof.analysis.attribution import run_totals
    from ckptprof.results import Verdict

    totals = run_totals(session)
    verdict = session.verdict or Verdict()
    wall = verdict.load_wall_s or 0.0
    timed = [r for r in one.results if r.started_monotonic is not None and r.models]
    starts = [r.started_monotonic for r in timed]
    # Where the rank's last model was loaded (the walls the session's load wall is made of): the recorder's
    # bookkeeping after it counts as gathering the results.
    ends = [r.started_monotonic + max(m.start_s + m.wall_s for m in r.models) for r in timed]
    return {
        "load_wall_s": wall,
        "read_s": round(totals.read_s, 4),
        "deserialize_s": round(totals.deserialize_s, 4),
        "h2d_s": round(totals.h2d_s, 4),
        "other_s": round(totals.other_s, 4),
        # What the timed round held besides the load: releasing the ranks and hearing that they loaded; of it, the
        # wait for the last rank to start (a rank that finds no free core starts late) and for its "loaded" (a hair
        # below zero when that rank's wall closed just after it signalled).
        "overhead_s": round(one.timed_s - wall, 5),
        # The load on all ranks from the first rank's start to the last rank's end: the load wall (the slowest
        # rank's) plus the ranks' start skew, which a machine short of free cores adds.
        "span_s": round(max(ends) - min(starts), 5) if starts else None,
        "start_s": round(max(starts) - one.released_at, 5) if starts else None,
        "gather_s": round(one.answered_at - max(ends), 5) if ends else None,
        "GBps": verdict.achieved_GBps,
        "bottleneck": verdict.bottleneck,
    }


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in GATED:
        values = [r[key] for r in rounds if r.get(key) is not None]
        out[key] = round(statistics.median(values), 5) if values else None
    found = [r["bottleneck"] for r in rounds if r.get("bottleneck")]
    out["bottleneck"] = Counter(found).most_common(1)[0][0] if found else None
    return out


def _round_session(plan: Any, models: list[Any], results: list[Any]) -> Any:
    import datetime as dt

    from ckptprof.run.notes import add_notes_and_verdict
    from ckptprof.session import Session

    session = Session(
        config=plan.config(), created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    session.config.launcher = "spawn"
    session.models = models
    session.ranks = results
    add_notes_and_verdict(session)
    return session


def _prepare_cache(plan: Any, cache: str) -> list[Any]:
    """The models' cache state for the round about to start; a cold cache that cannot be dropped is a problem."""
    from ckptprof.run.cache_prep import model_info, prepare_cache

    infos = []
    for model in plan.models:
        resident, note = prepare_cache(model, cache)
        if cache == "cold" and note.startswith("could not"):
            raise FixtureProblem(f"cache='cold': {note} ({model.path})")
        infos.append(model_info(model, resident, note))
    return infos


def _benchmark_rounds(
    benchmark: Any,
    gates: list[PhaseGate],
    baseline: Callable[[str], tuple[dict[str, Any], str] | None],
    target: str | Path,
    draft: str | Path | None,
    cache: str,
    tp: int,
    devices: str,
    rounds: int,
    warmup_rounds: int,
    replay_kwargs: dict[str, Any],
    keep: Callable[[Any], None],
) -> Any:
    from ckptprof.errors import CkptprofError
    from ckptprof.loader.plan import build_plan
    from ckptprof.loader.resident import RankFailed, ResidentRanks

    try:
        plan = build_plan(target, draft, tp=tp, devices=devices, cache=cache, **replay_kwargs)
    except (CkptprofError, OSError) as exc:
        raise FixtureProblem(str(exc).splitlines()[0]) from None
    ranks = ResidentRanks(plan)
    keep(ranks)
    recorded: list[_Round] = []
    models: list[Any] = []
    try:
        ranks.start()

        def take_results() -> None:
            """The last released round's results, taken outside the timed part; a rank that failed ends the test."""
            if ranks.pending is None:
                return
            results = ranks.results()
            recorded[-1].results = results
            failed = [r for r in results if r.status != "ok" or r.error]
            if failed:
                reason = (failed[0].error or failed[0].status).splitlines()[0]
                raise FixtureProblem(f"rank {failed[0].rank} ({failed[0].device}) failed: {reason}")

        def setup() -> None:
            take_results()
            ranks.arm()
            # After the ranks are at their start lines: what they prepared cannot warm what was dropped.
            models[:] = _prepare_cache(plan, cache)

        def one_round() -> None:
            # Timed by pytest-benchmark: the release, until every rank has loaded its last shard; the results and
            # the sessions are taken after it.
            began = time.perf_counter()
            ranks.release()
            timed = time.perf_counter() - began
            recorded.append(_Round(list(models), [], timed, ranks.released_at, ranks.answered_at))

        benchmark.pedantic(one_round, setup=setup, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1)
        try:
            take_results()
        except (FixtureProblem, RankFailed):
            benchmark.has_error = (
                True  # a failed round measured nothing: pytest-benchmark neither saves nor shows it
            )
            raise
    except RankFailed as exc:
        raise FixtureProblem(str(exc)) from None
    finally:
        ranks.close()
    # Warm-up rounds ran first (none when the benchmark is disabled: it then runs one round).
    kept = recorded[0 if benchmark.disabled else warmup_rounds :]
    sessions = [_round_session(plan, one.models, one.results) for one in kept]
    per_round = [_figures(session, one) for session, one in zip(sessions, kept, strict=True)]
    last = sessions[-1]
    verdict = last.verdict
    benchmark.extra_info.update(
        {
            "cache": cache,
            "tp": tp,
            "devices": devices,
            "checkpoint_bytes": verdict.checkpoint_bytes if verdict else None,
            **_medians(per_round),
            "h2d_stand_in": verdict.h2d_stand_in if verdict else None,
            "rounds": per_round,
        }
    )
    found = baseline(benchmark.fullname) if gates else None
    if gates and found is None:
        warnings.warn(
            f"ckptprof: no baseline for {benchmark.fullname}: --ckptprof-compare-fail checks nothing",
            stacklevel=1,
        )
    if found is not None:
        base, source = found
        failures = [
            gate.failure(benchmark.extra_info.get(gate.phase), base.get(gate.phase), source) for gate in gates
        ]
        if any(failures):
            raise FixtureProblem("; ".join(f for f in failures if f))
    return last


class ReplayBenchmark:
    """What the ``ckptprof_replay`` fixture gives a test: call it with pytest-benchmark's ``benchmark``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gates = [PhaseGate.parse(text) for text in config.getoption("ckptprof_compare_fail", None) or []]
        self.pools: list[Any] = []

    def __call__(
        self,
        benchmark: Any,
        target: str | Path,
        draft: str | Path | None = None,
        cache: str = "warm",
        tp: int = 1,
        devices: str = "cpu",
        rounds: int = 3,
        warmup_rounds: int = 0,
        **replay_kwargs: Any,
    ) -> Any:
        """Benchmark the load of ``target`` (and ``draft``); returns the last round's session. ``replay_kwargs``
        are other ``ReplayOptions`` fields (``strategy="sglang-mt"``, ``strategy_params={...}``)."""
        try:
            return _benchmark_rounds(
                benchmark,
                self.gates,
                self.baseline,
                target,
                draft,
                cache,
                tp,
                devices,
                rounds,
                warmup_rounds,
                replay_kwargs,
                self.pools.append,
            )
        except FixtureProblem as exc:
            problem = str(exc)
        pytest.fail(f"ckptprof_replay: {problem}", pytrace=False)

    def baseline(self, fullname: str) -> tuple[dict[str, Any], str] | None:
        """This test's extra_info in the run ``--benchmark-compare`` loaded (pytest-benchmark reads it at start)."""
        session = getattr(self.config, "_benchmarksession", None)
        for path, benches in (getattr(session, "compared_mapping", None) or {}).items():
            if fullname in benches:
                return benches[fullname].get("extra_info") or {}, Path(str(path)).name
        return None

    def close(self) -> None:
        for pool in self.pools:
            pool.close()


@pytest.fixture
def ckptprof_replay(request: pytest.FixtureRequest) -> Any:
    """Call it as ``ckptprof_replay(benchmark, path, cache="cold", tp=8, draft=None, devices="cpu", rounds=3)``."""
    replay = ReplayBenchmark(request.config)
    # The ranks are closed when the rounds end; this also covers a test stopped in between (Ctrl-C).
    request.addfinalizer(replay.close)
    return replay
