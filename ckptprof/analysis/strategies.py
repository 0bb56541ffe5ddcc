"""Loading strategies side by side: which one is fastest, what selects it, how far each is from the floor.

Pure: reads one session per strategy (same checkpoint, cache mode and TP), returns a ``StrategyComparison``; no
torch, no I/O. The floor is what no loader gets below on these devices: max(bytes that must come from storage /
the storage ceiling, the parameter bytes each device receives / its pinned host-to-device ceiling). The
comparison also checks that every strategy loaded the same values as the ``sglang`` strategy (by the per-rank
parameter digests a ``--verify`` run records).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ckptprof.analysis.attribution import checkpoint_bytes, load_wall, run_totals
from ckptprof.analysis.verdict import cold_fraction, compute_verdict
from ckptprof.engines import flags
from ckptprof.engines import vllm as vllm_engine
from ckptprof.engines.sglang import MT_DEFAULT_THREADS
from ckptprof.results import StrategyComparison, StrategyRow, positive
from ckptprof.session import Session

REFERENCE = "sglang"
NO_FLAGS = "(default: no flags)"
# The SGLang flags of each strategy at its default parameters, for sessions without a release profile; a session's
# config["strategy_flags"] wins, and the release profile in force over both (release_flags).
DEFAULT_FLAGS = {
    "sglang": NO_FLAGS,
    "sglang-mt": flags.multithread(8),
    "sglang-mt-completed": flags.multithread(8) + " (releases that yield in completion order)",
    "no-mmap": flags.DISABLE_MMAP,
    "prefetch": flags.PREFETCH,
    "pipelined": "not an SGLang flag: what a pinned, pipelined loader reaches (fastsafetensors-like)",
    "fastsafetensors": flags.load_format("fastsafetensors"),
    "pipelined-shared": "not an SGLang flag: each byte read once per node, handed to the TP ranks through shared host memory",
}
NOT_SGLANG = ("pipelined", "pipelined-shared", "vllm", "vllm-eager", "vllm-prefetch", "vllm-mt")
# What a vLLM server can select: its own paths and the load formats it shares with SGLang.
VLLM_SELECTABLE = (
    "vllm",
    "vllm-eager",
    "vllm-prefetch",
    "vllm-mt",
    "fastsafetensors",
    "runai-streamer",
    "instanttensor",
)


def engine_of(sessions: list[Session]) -> str:
    """ "vllm" when the sessions replay vLLM (``run --engine vllm``), else "sglang"."""
    return "vllm" if any(s.config.vllm_release is not None for s in sessions) else "sglang"


# A warm run that still fetched more than this fraction of the checkpoint from storage bypassed the page cache.
BYPASS_FRACTION = 0.5


def strategy_label(config: Mapping[str, Any]) -> str:
    """``pipelined`` at its defaults, ``pipelined:readers=32`` with parameters: what tells two runs of one strategy
    apart (the same spelling `--strategy` takes)."""
    name = str(config.get("strategy", "?"))
    params = config.get("strategy_params") or {}
    return ":".join([name, *(f"{k}={_spell(v)}" for k, v in sorted(params.items()))])


def _spell(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def release_flags(config: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(the flags that select the session's strategy on the release it replays, whether that is the release's
    default path), from the release profile recorded in the session; None where none is recorded or the profile
    does not describe the strategy (its own flags stand)."""
    name = str(config.get("strategy", ""))
    params = dict(config.get("strategy_params") or {})
    vllm = config.get("vllm_release")
    if isinstance(vllm, dict):
        return _vllm_flags(vllm, name, params)
    sglang = config.get("sglang_release")
    if isinstance(sglang, dict):
        return _sglang_flags(sglang, name, params)
    return None


def _sglang_flags(release: dict[str, Any], name: str, params: dict[str, Any]) -> tuple[str, bool] | None:
    # On a line whose default is the multithread loader (0.5.10 on) the extra config's enable_multithread_load
    # defaults to true: one thread is what takes a flag, and more threads only num_threads.
    mt_default = bool(release.get("multithread_default"))
    profile = release.get("profile", "?")
    if name == "sglang" and not params:
        if mt_default:
            return flags.extra_config({"enable_multithread_load": False}), False
        return NO_FLAGS, True
    if name not in ("sglang-mt", "sglang-mt-completed"):
        return None
    multithread = release.get("multithread_strategy")
    if multithread is None:
        return f"not on SGLang {profile}: it has no multithread loader", False
    if multithread != name:
        return f"not on SGLang {profile}: its multithread loader is {multithread}", False
    threads = params.get("num_threads", MT_DEFAULT_THREADS)
    defaults = release.get("default_params") or {}
    default = (
        mt_default
        and release.get("default_strategy") == name
        and threads == defaults.get("num_threads", MT_DEFAULT_THREADS)
    )
    if default:
        return NO_FLAGS, True
    return flags.multithread(int(threads), opt_in=not mt_default), False


def _vllm_flags(release: dict[str, Any], name: str, params: dict[str, Any]) -> tuple[str, bool] | None:
    """vLLM's flags for each of its paths on the profile in force, and which path is its default here: the lazy
    path, or prefetching where the release prefetches on its own (its rule, decided for this checkpoint and saved
    with the profile as ``prefetch_decision``)."""
    profile = vllm_engine.profile_named(str(release.get("profile", "")))
    if profile is None:
        return None
    decision = release.get("prefetch_decision")
    auto_prefetch = isinstance(decision, dict) and bool(decision.get("prefetch"))
    if name == REFERENCE:
        return "not a vLLM path: SGLang's default, the values' reference", False
    if name == "vllm" and not params:
        return (vllm_engine.load_strategy("lazy"), False) if auto_prefetch else (NO_FLAGS, True)
    if name == "vllm-eager":
        return vllm_engine.load_strategy("eager"), False
    if name == "vllm-mt":
        return vllm_engine.multithread(int(params.get("num_threads", vllm_engine.DEFAULT_NUM_THREADS))), False
    if name != "vllm-prefetch":
        return None
    if "prefetch" not in profile.strategies:
        return (
            f"not on vLLM {profile.name}: its {vllm_engine.LOAD_STRATEGY} takes {', '.join(profile.strategies)}",
            False,
        )
    threads = int(params.get("num_threads", vllm_engine.PREFETCH_THREADS))
    block = int(params.get("block_mib", vllm_engine.PREFETCH_BLOCK_BYTES >> 20)) << 20
    if (
        auto_prefetch
        and threads == vllm_engine.PREFETCH_THREADS
        and block == vllm_engine.PREFETCH_BLOCK_BYTES
    ):
        return NO_FLAGS, True
    return vllm_engine.prefetch_flags(profile, threads, block), False


def floor_seconds(session: Session) -> float | None:
    """max(storage part, per-device pinned H2D part, host part); None when no ceiling was measured. The host part is
    every copied byte through the warm pipeline (page cache read into host memory and copied out at once: the two
    share the host's memory, so a loader copying through it gets no faster warm)."""
    ceilings = session.ceilings
    parts: list[float] = []
    storage = positive(ceilings.storage_read_n_streams_GBps) or positive(ceilings.storage_read_GBps)
    fetched = checkpoint_bytes(session) * cold_fraction(session)
    if storage and fetched > 0:
        parts.append(fetched / storage / 1e9)
    pinned = ceilings.h2d_pinned_GBps or {}
    per_device: dict[str, int] = {}
    for r in session.ranks:  # ranks sharing a device share its link
        per_device[r.device] = per_device.get(r.device, 0) + r.param_bytes
    for device, nbytes in per_device.items():
        rate = positive(pinned.get(device))
        if rate and nbytes:
            parts.append(nbytes / rate / 1e9)
    host = positive(ceilings.warm_pipeline_GBps)
    copied = sum(per_device.values())
    if host and copied:
        parts.append(copied / host / 1e9)
    return max(parts) if parts else None


def session_status(session: Session) -> tuple[str, str | None]:
    """("ok" | "failed" | "unavailable", the reason): unavailable is a strategy whose package is missing."""
    errors = [r.error or "" for r in session.ranks if r.status != "ok"]
    if not session.ranks:
        return "failed", "no rank reported"
    if errors:
        unavailable = next((e for e in errors if "StrategyUnavailable" in e), None)
        if unavailable is not None:
            return "unavailable", unavailable.split("StrategyUnavailable: ", 1)[-1].split(" at ", 1)[0]
        return "failed", errors[0]
    shard_errors = [r.error for r in session.ranks if r.error]
    return ("failed", shard_errors[0]) if shard_errors else ("ok", None)


def _verify(session: Session, reference: Session | None) -> tuple[str, list[str]]:
    mine = {r.rank: r.checksums for r in session.ranks}
    if any(c is None for c in mine.values()) or not mine:
        return "not verified", []
    if reference is None:
        return "no reference", []
    ref = {r.rank: r.checksums for r in reference.ranks}
    differing: list[str] = []
    for rank, sums in sorted(mine.items()):
        theirs = ref.get(rank)
        if theirs is None:
            return "no reference", []
        assert sums is not None
        for key in sorted(set(sums) | set(theirs)):
            if sums.get(key) != theirs.get(key):
                differing.append(f"rank {rank}: {key}")
    return ("differs" if differing else "equal"), differing[:20]


def _row(session: Session, reference: Session | None) -> StrategyRow:
    config = session.config
    name = config.strategy or "?"
    status, error = session_status(session)
    selected = config.strategy_flags or DEFAULT_FLAGS.get(name, "")
    by_release = release_flags(config)
    if by_release is not None:
        # The draft's own load format, when it had one, still follows.
        selected = " ".join(f for f in (by_release[0], config.draft_strategy_flags) if f)
    row = StrategyRow(
        strategy=name,
        params=dict(config.strategy_params or {}),
        flags=selected,
        status=status,
        error=error,
        label=strategy_label(config),
    )
    if session is reference:
        row = replace(row, verify="reference")
    else:
        verify, differing = _verify(session, reference)
        row = replace(row, verify=verify, differing=tuple(differing))
    if status == "unavailable":
        return row
    wall = load_wall(session)
    totals = run_totals(session)
    verdict = session.verdict or compute_verdict(session)
    ckpt = checkpoint_bytes(session)
    floor = floor_seconds(session)
    notes = []
    if config.cache == "warm" and ckpt and totals.storage_bytes > BYPASS_FRACTION * ckpt:
        notes.append(
            f"read {totals.storage_bytes / 1e9:.2f} GB from storage although the checkpoint was in the page cache "
            "(direct I/O bypasses a warm page cache)"
        )
    if row.verify == "differs":
        notes.append(f"loaded different values than {REFERENCE}: {', '.join(row.differing[:3])}")
    return replace(
        row,
        wall_s=round(wall, 4) if wall > 0 else None,
        GBps=round(ckpt / wall / 1e9, 4) if wall > 0 else None,
        shares={k: round(v, 4) for k, v in totals.shares().items()},
        bottleneck=verdict.bottleneck,
        storage_bytes=totals.storage_bytes,
        floor_s=None if floor is None else round(floor, 4),
        x_floor=round(wall / floor, 3) if floor and wall > 0 else None,
        notes=tuple(notes),
    )


def _consistency(sessions: list[Session]) -> list[str]:
    warnings = []
    for key in ("tp", "cache", "devices"):
        values = {repr(getattr(s.config, key)) for s in sessions}
        if len(values) > 1:
            warnings.append(
                f"the sessions differ in {key} ({', '.join(sorted(values))}): not a like-for-like comparison"
            )
    paths = {tuple(m.path for m in s.models) for s in sessions}
    if len(paths) > 1:
        warnings.append("the sessions loaded different checkpoints")
    return warnings


def compare_strategies(sessions: list[Session]) -> StrategyComparison:
    """One row per session (strategy), the fastest, its flags, the floor and the value check."""
    # The reference is SGLang's default path at its defaults (a parameterised sglang variant only when that is absent).
    candidates = [s for s in sessions if s.config.strategy == REFERENCE]
    reference = next((s for s in candidates if not s.config.strategy_params), None) or next(
        iter(candidates), None
    )
    rows = [_row(s, reference) for s in sessions]
    ok = [r for r in rows if r.status == "ok" and r.wall_s]
    fastest = min(ok, key=lambda r: r.wall_s or 0.0) if ok else None
    engine = engine_of(sessions)
    if engine == "vllm":
        selectable = [r for r in ok if r.strategy in VLLM_SELECTABLE]
    else:
        selectable = [r for r in ok if r.strategy not in NOT_SGLANG]
    fastest_sglang = min(selectable, key=lambda r: r.wall_s or 0.0) if selectable else None
    floors = [r.floor_s for r in rows if r.floor_s is not None]
    floor = max(floors) if floors else None
    warnings = _consistency(sessions)
    for r in rows:
        if r.verify == "differs":
            warnings.append(f"{r.label} loaded different parameter values than {REFERENCE}")
    # The release's default path among the rows (None: no release recorded, the reference stands for it; "": the
    # release's default was not replayed).
    default: str | None = None
    release_key = "vllm_release" if engine == "vllm" else "sglang_release"
    if any(s.config.get(release_key) is not None for s in sessions):
        default = next(
            (
                r.label
                for s, r in zip(sessions, rows, strict=True)
                if (release_flags(s.config) or ("", False))[1]
            ),
            "",
        )
    return StrategyComparison(
        rows=tuple(rows),
        fastest=None if fastest is None else fastest.label,
        fastest_flags=None if fastest is None else fastest.flags,
        fastest_sglang=None if fastest_sglang is None else fastest_sglang.label,
        floor_s=floor,
        summary=_summary(
            rows, fastest, fastest_sglang, floor, "vLLM" if engine == "vllm" else "SGLang", default
        ),
        warnings=tuple(warnings),
    )


def _summary(
    rows: list[StrategyRow],
    fastest: StrategyRow | None,
    fastest_sglang: StrategyRow | None,
    floor: float | None,
    engine: str = "SGLang",
    default: str | None = None,
) -> str:
    if fastest is None:
        return "no strategy completed"
    parts = [f"fastest: {fastest.label} {fastest.wall_s:.3f} s ({fastest.GBps or 0.0:.2f} GB/s)"]
    if fastest.x_floor is not None and floor is not None:
        parts[0] += f", {fastest.x_floor:.2f}x the {floor:.3f} s floor"
    base_name = "the default"
    if engine == "vLLM":  # the values' reference is sglang's, the default path to beat is vLLM's own
        base = next((r for r in rows if r.label == (default or "vllm")), None)
        base_name = "vLLM's default"
    elif default:  # the release's default path, replayed
        base = next((r for r in rows if r.label == default), None)
    else:
        base = next((r for r in rows if r.verify == "reference"), None) or next(
            (r for r in rows if r.label == REFERENCE), None
        )
        if default == "" and base is not None:  # the release's default was not replayed: name what was
            base_name = base.label
    if base is not None and base is not fastest and base.wall_s and fastest.wall_s:
        parts.append(f"{base.wall_s / fastest.wall_s:.2f}x faster than {base_name} ({base.wall_s:.3f} s)")
    if fastest_sglang is not None and fastest_sglang is not fastest:
        parts.append(
            f"fastest with {engine} flags: {fastest_sglang.label} ({fastest_sglang.flags}) {fastest_sglang.wall_s:.3f} s"
        )
    elif fastest_sglang is fastest:
        parts.append(f"select it with {fastest.flags}")
    unavailable = [r.label for r in rows if r.status == "unavailable"]
    if unavailable:
        parts.append(f"unavailable: {', '.join(unavailable)}")
    return "; ".join(parts)
