"""The verdict: which limit binds, with achieved vs ceiling numbers, and the SGLang flags to try.

Pure: reads a Session (its ranks and its ceilings), returns a ``Verdict``. No torch, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ckptprof.analysis.attribution import (
    checkpoint_bytes,
    faithful_delta,
    faithful_load_wall,
    load_wall,
    path_attribution,
    rank_skew,
    run_totals,
    sampled_attribution,
)
from ckptprof.analysis.vllm_flags import vllm_predictions
from ckptprof.engines import flags
from ckptprof.engines.sglang import MT_DEFAULT_THREADS, LoaderProfile, multithread_extra_config, profile_named
from ckptprof.fstypes import is_network_fs
from ckptprof.rates import predicted_seconds
from ckptprof.results import Prediction, Verdict, positive, slowest_device
from ckptprof.session import Session
from ckptprof.units import age_words

SKEW_LIMIT = 1.5
# Top shares closer than this (absolute, of rank time) name no winner: on the 2-core CPU VM, identical default runs
# moved the read / deserialize / copy / other shares by up to this much (reports/cpu/2026-11-30-verdict-noise).
CLOSE_SHARE = 0.10
PHASE_BOTTLENECK = {
    "storage": "storage",
    "page_cache": "page-cache",
    "h2d": "h2d",
    "deserialize": "deserialize",
    "other": "cpu",
}
# Every word `verdict.bottleneck` can hold when there are timings (the JSON contract users script against).
BOTTLENECKS = ("storage", "page-cache", "deserialize", "h2d", "rank-skew", "cpu", "mixed")
PHASE_WORDS = {
    "storage": "storage reads",
    "page_cache": "page-cache faults",
    "h2d": "copies",
    "deserialize": "deserialisation",
    "other": "other work",
}
# Strategies whose reads of cached bytes are page faults on safetensors' mmap (the rest read with pread/read()).
MMAP_STRATEGIES = frozenset({"sglang", "sglang-mt", "sglang-mt-completed", "prefetch"})

MT_FLAG = flags.multithread(16)
PREFETCH_FLAG = flags.PREFETCH
NO_MMAP_FLAG = flags.DISABLE_MMAP
FASTST_FLAG = flags.load_format("fastsafetensors")


# safetensors.torch.load(bytes) costs this many fresh-memory passes over the bytes (see _whole_file_seconds).
WHOLE_FILE_DESERIALIZE_PASSES = 2

# Reads faster than this multiple of the measured storage ceiling mean the ceiling or the storage misled us.
ABOVE_CEILING = 1.05


def storage_amplification(session: Session, ckpt: int, fs_types: list[str]) -> tuple[float | None, str]:
    """Bytes fetched from storage by all ranks / checkpoint bytes, and where the figure comes from.

    The kernel's per-task read_bytes counts block-device reads; network and FUSE file systems are not counted
    there. On those, what each rank found missing from the page cache when it opened each shard is used instead:
    an upper bound, since ranks reading the same file at once may still share one fetch.
    """
    if not ckpt:
        return None, "none"
    totals = run_totals(session)
    if totals.storage_bytes > 0 or not any(is_network_fs(f) for f in fs_types):
        return totals.storage_bytes / ckpt, "kernel io accounting (read_bytes)"
    missing = sum(
        min(s.nonresident_bytes, s.bytes) for r in session.ranks for m in r.models for s in m.shards
    )
    return (
        missing / ckpt,
        "upper bound from page-cache residency at each shard's start (network fs: not in io accounting)",
    )


def cold_fraction(session: Session) -> float:
    """Fraction of the checkpoint that was not in the page cache when the replay started."""
    total = sum(m.total_bytes for m in session.models)
    known = [m for m in session.models if m.resident_bytes_before is not None]
    if total == 0:
        return 0.0
    if known:
        missing = sum(m.total_bytes - (m.resident_bytes_before or 0) for m in known)
        return max(0.0, min(1.0, missing / sum(m.total_bytes for m in known)))
    # Fall back to what rank 0 saw at each shard's start.
    rank0 = next((r for r in session.ranks if r.rank == 0), None)
    if rank0 is None:
        return 0.0
    missing = sum(s.nonresident_bytes for m in rank0.models for s in m.shards)
    return max(0.0, min(1.0, missing / total))


def _ceiling_origin(reused: Mapping[str, object] | None) -> str:
    """'measured in the same run', or how old the reused probe was (a reused figure is never this run's)."""
    age = reused.get("age_s") if reused else None
    if not isinstance(age, (int, float)):
        return "measured in the same run"
    return f"reused from a probe {age_words(float(age))} old (not measured in this run)"


def _fmt(x: float | None, unit: str = "GB/s") -> str:
    return "n/a" if x is None else f"{x:.2f} {unit}"


def _pct(a: float, b: float | None) -> str:
    return f" ({100 * a / b:.0f}%)" if b else ""


def compute_verdict(session: Session) -> Verdict:
    totals = run_totals(session)
    decomposed_shares = totals.shares()
    # SGLang's own load sampled in the kernel, when the run did (--sample-threads), names the bottleneck; else the
    # decomposed replay's shares of rank time, serialised.
    sampled = sampled_attribution(session)
    shares = sampled if sampled is not None else decomposed_shares
    basis = "of SGLang's own wall (its threads sampled)" if sampled is not None else "of rank time"
    wall = load_wall(session)
    ckpt = checkpoint_bytes(session)
    ceilings = session.ceilings
    devices = sorted({r.device for r in session.ranks if r.device})
    fs_types = sorted({m.fs_type for m in session.models})
    fs_type = ",".join(fs_types) or "unknown"
    stand_in = not any(d.startswith("cuda") for d in devices)
    cold = cold_fraction(session)
    skew = rank_skew(session)
    n_ranks = len(session.ranks)

    storage_best = positive(ceilings.storage_read_GBps)
    storage_1 = positive(ceilings.storage_read_1_stream_GBps) or storage_best
    storage_n = positive(ceilings.storage_read_n_streams_GBps) or storage_best
    page_cache = positive(ceilings.page_cache_read_GBps)
    pageable = slowest_device(ceilings.h2d_pageable_GBps, devices)
    pinned = slowest_device(ceilings.h2d_pinned_GBps, devices)

    achieved = ckpt / wall / 1e9 if wall > 0 else 0.0
    amplification, amplification_source = storage_amplification(session, ckpt, fs_types)
    exact = amplification_source.startswith("kernel")
    # Bytes that came from storage: the checkpoint's cold part, or more where the kernel counted every rank's.
    fetched = max(ckpt * cold, (amplification or 0.0) * ckpt if exact else 0.0)
    fetch_rate = fetched / wall / 1e9 if wall > 0 else 0.0
    # Rates are bytes over the wall-clock time in which they moved (threads copying at once count that time once).
    h2d_rate = totals.h2d_bytes / totals.h2d_busy / 1e9 if totals.h2d_busy > 0 else None
    phase = max(shares, key=lambda k: shares[k])
    close = close_phases(shares)

    if not session.ranks or totals.wall_s <= 0:
        bottleneck = "unknown"
    elif len(close) > 1:
        bottleneck = "mixed"
    else:
        bottleneck = PHASE_BOTTLENECK[phase]
    # The remedies worth predicting are the top phase's, even when others are as large.
    remedied = PHASE_BOTTLENECK[phase] if bottleneck == "mixed" else bottleneck
    if n_ranks > 1 and skew > SKEW_LIMIT and bottleneck != "unknown":
        secondary = bottleneck
        bottleneck = "rank-skew"
    else:
        secondary = None

    pinned_note = f"; pinned H2D would allow {_fmt(pinned)}" if pinned else ""
    if stand_in:
        pinned_note += " (no CUDA device: 'h2d' is a host-copy stand-in)"
    # The read phase of the slowest-reading rank is when the unique bytes came in (ranks share the page cache).
    # Wall-clock: 16 reader threads reading for the same second read for one second, not sixteen.
    read_wall = max((run_totals(Session(ranks=[r])).read_busy for r in session.ranks), default=0.0)
    read_rate = fetched / read_wall / 1e9 if read_wall > 0 else 0.0
    if bottleneck == "storage":
        summary = (
            f"storage-bound: reads fetched {fetched / 1e9:.2f} GB at {read_rate:.2f} GB/s vs {_fmt(storage_best)} "
            f"cold read ceiling on {fs_type}{_pct(read_rate, storage_best)}; fetching them took "
            f"{100 * shares['storage']:.0f}% {basis}{pinned_note}"
        )
        if amplification is not None and amplification > 1.5 and n_ranks > 1:
            bound = "" if exact else "up to "
            summary += (
                f"; the {n_ranks} ranks fetched {bound}{amplification:.1f}x the checkpoint from storage "
                "(the page cache did not serve them all from one read)"
            )
    elif bottleneck == "page-cache":
        fault_rate = totals.bytes / totals.read_busy / 1e9 if totals.read_busy > 0 else 0.0
        # SGLang's mmap paths bring cached bytes in by page faults; the others read them (pread, read()).
        faults = session.config.get("strategy", "sglang") in MMAP_STRATEGIES
        how, via = ("mmap page faults", "through faults") if faults else ("reads from the page cache", "read")
        host = positive(ceilings.warm_pipeline_GBps)
        # Reading the page cache and copying to the device at once share the host's memory: the pair's own ceiling.
        host_note = (
            f"; reading the page cache and copying at once, this host reaches {_fmt(host)}" if host else ""
        )
        summary = (
            f"page-cache-bound: {100 * (1 - cold):.0f}% of the checkpoint was cached, yet {how} took "
            f"{100 * shares['page_cache']:.0f}% {basis} ({fault_rate:.2f} GB/s {via} vs "
            f"{_fmt(page_cache)} plain page-cache reads){pinned_note}{host_note}"
        )
    elif bottleneck == "h2d" and stand_in:
        # No CUDA device: the copies are host memcpys standing in for H2D; there is no link to be bound by.
        memcpy = positive(ceilings.memcpy_GBps)
        summary = (
            f"host-copy-bound (no CUDA device: 'h2d' is a host-copy stand-in): the copies took "
            f"{100 * shares['h2d']:.0f}% {basis} at {_fmt(h2d_rate)} vs {_fmt(memcpy)} host memcpy"
            f"{_pct(h2d_rate or 0.0, memcpy)}"
        )
    elif bottleneck == "h2d":
        summary = (
            f"h2d-bound: host-to-device copies took {100 * shares['h2d']:.0f}% {basis} at {_fmt(h2d_rate)} vs "
            f"{_fmt(pageable)} pageable ceiling{_pct(h2d_rate or 0.0, pageable)}{pinned_note}"
        )
    elif bottleneck == "deserialize":
        summary = (
            f"deserialize-bound: safe_open/get_tensor/narrow took {100 * shares['deserialize']:.0f}% {basis}"
        )
    elif bottleneck == "cpu":
        summary = (
            f"cpu-bound: {100 * shares['other']:.0f}% {basis} was outside reads, deserialisation and copies"
        )
    elif bottleneck == "mixed":
        listed = ", ".join(f"{PHASE_WORDS[k]} {100 * shares[k]:.0f}%" for k in close)
        summary = (
            f"no single bottleneck: {listed} {basis}, within {100 * CLOSE_SHARE:.0f} points of each other "
            "(identical runs move shares this much; none of them binds alone)"
        )
        if stand_in and "h2d" in close:
            summary += " (no CUDA device: 'h2d' is a host-copy stand-in)"
    elif bottleneck == "rank-skew":
        summary = (
            f"rank-skew: the slowest rank took {skew:.2f}x the median rank's wall (then {secondary}-bound)"
        )
    else:
        summary = "no rank produced timings"
    missing = incomplete_work(session)
    if missing and not session.ranks:
        summary = f"incomplete run: {'; '.join(missing)}: no load was measured"
        achieved = 0.0
    elif missing:
        # A load that did not finish has no throughput: a failed rank's 0.00 s is not a fast load.
        done = completed_bytes(session)
        summary = (
            f"incomplete run: {'; '.join(missing)}; the figures cover the completed work only "
            f"({done / 1e9:.2f} GB of {ckpt / 1e9:.2f} GB in {wall:.2f} s, no throughput for an unfinished load); "
            + summary
        )
        achieved = 0.0
    else:
        summary += f"; {achieved:.2f} GB/s overall ({ckpt / 1e9:.2f} GB in {wall:.2f} s, {n_ranks} rank(s))"

    predictions = _predictions(
        session,
        remedied if secondary is None or secondary == "mixed" else secondary,
        cold,
        storage_1,
        storage_n,
        pinned,
        fs_type,
    )
    engine_note = None
    vllm_release = session.config.get("vllm_release")
    if isinstance(vllm_release, dict):
        # A vLLM server takes vLLM's flags: the same mechanisms respelled, SGLang-only ones dropped.
        predictions, engine_note = vllm_predictions(
            vllm_release, str(session.config.get("strategy", "")), predictions
        )
    now = faithful_load_wall(session) or wall
    predictions = [
        # Still listed and still checked by --check-predictions, but never sold as a remedy.
        replace(p, slower_than_now=p.predicted_s is not None and now > 0 and p.predicted_s >= round(now, 3))
        for p in predictions
    ]
    recommendations = [_recommendation(p, now) for p in predictions]
    fdelta = faithful_delta(session)
    on_path, path_source = path_attribution(session)
    if bottleneck == "storage" and on_path is not None and sampled is None:  # sampled: already SGLang's own
        summary += (
            f"; storage was busy for {100 * on_path['storage']:.0f}% of SGLang's own load (faithful wall; "
            f"{path_source})"
        )
    faithful_note = None
    if fdelta is not None and fdelta > 0.05:
        faithful_note = (
            f"the decomposed phases took {100 * fdelta:.0f}% longer than SGLang's own sequence: there the copy "
            "overlaps the page-fault I/O of the next chunk, here they are timed one after the other, so the shares "
            "describe serialised work"
        )
    storage_note = None
    if cold >= 0.5 and storage_best and read_rate > ABOVE_CEILING * storage_best:
        # Nothing should read faster than the ceiling: one of the two figures is not what it claims to be.
        storage_note = (
            f"the replay read at {100 * read_rate / storage_best:.0f}% of the cold read ceiling "
            f"{_ceiling_origin(ceilings.reused)}: the probe under-measured this storage (its reads are not "
            "SGLang's page faults), the "
            "kernel's read-ahead fetched part of the bytes while other phases were timed, or the storage lets "
            "reads catch up after idle gaps (a token bucket: a cgroup io.max cap, a cloud volume's throughput "
            "credits) - in the last two cases storage held SGLang's load for longer than the storage share says"
        )
        faithful_wall = faithful_load_wall(session)
        if faithful_wall > 0:
            # Under a throughput cap, this is the cap: the figure to hold against the volume's advertised rate.
            storage_note += (
                f"; SGLang's own sequence fetched {fetched / 1e9:.2f} GB in {faithful_wall:.2f} s "
                f"({fetched / faithful_wall / 1e9:.2f} GB/s)"
            )
    return Verdict(
        bottleneck=bottleneck,
        secondary=secondary,
        close=tuple(PHASE_BOTTLENECK[k] for k in close) if len(close) > 1 else (),
        shares={k: round(v, 4) for k, v in decomposed_shares.items()},
        sampled_shares=None if sampled is None else {k: round(v, 4) for k, v in sampled.items()},
        summary=summary,
        recommendations=tuple(recommendations),
        predictions=tuple(predictions),
        achieved_GBps=None if missing else round(achieved, 4),
        incomplete=tuple(missing),
        fetched_GBps=round(fetch_rate, 4),
        h2d_GBps=None if h2d_rate is None else round(h2d_rate, 4),
        cold_fraction=round(cold, 4),
        load_wall_s=round(wall, 4),
        checkpoint_bytes=ckpt,
        read_amplification=round(totals.bytes / ckpt, 3) if ckpt else None,
        storage_amplification=None if amplification is None else round(amplification, 3),
        storage_amplification_source=amplification_source,
        major_faults_per_GB=round(totals.major_faults / (totals.bytes / 1e9), 1) if totals.bytes else None,
        rank_skew=round(skew, 3),
        fs_type=fs_type,
        network_fs=any(is_network_fs(f) for f in fs_types),
        h2d_stand_in=stand_in,
        faithful_delta=None if fdelta is None else round(fdelta, 4),
        path_shares=None if on_path is None else {k: round(v, 4) for k, v in on_path.items()},
        path_storage_source=path_source,
        faithful_note=faithful_note,
        storage_note=storage_note,
        engine_note=engine_note,
        read_GBps=round(read_rate, 4),
        floor_s=_floor(
            ckpt, cold, storage_n, pinned, totals.h2d_bytes, n_ranks, positive(ceilings.warm_pipeline_GBps)
        ),
    )


def close_phases(shares: dict[str, float]) -> list[str]:
    """The phases whose share is within CLOSE_SHARE of the largest, largest first (one phase: a clear winner)."""
    ranked = sorted(shares, key=lambda k: -shares[k])
    if not ranked:
        return []
    top = shares[ranked[0]]
    close = [k for k in ranked if top - shares[k] <= CLOSE_SHARE and shares[k] > 0]
    if set(close) <= {"storage", "page_cache"}:
        return close[:1]  # both are the read phase: reading binds, split by what was cached
    return close


def incomplete_work(session: Session) -> list[str]:
    """What the run did not finish: failed or missing ranks, failed shards (empty for a complete run)."""
    out = []
    interrupted = session.extra.get("interrupted")
    if isinstance(interrupted, dict):
        out.append(
            f"interrupted ({interrupted.get('by', 'Ctrl-C')}) during the {interrupted.get('stage', 'run')}"
        )
    expected = session.config.get("tp")
    if isinstance(expected, int) and not session.ranks and interrupted:
        out.append("no rank replayed anything")
    elif isinstance(expected, int) and 0 < len(session.ranks) < expected:
        out.append(f"{expected - len(session.ranks)} of {expected} ranks reported nothing")
    failed = [r for r in session.ranks if r.status != "ok"]
    if failed:
        first = failed[0]
        reason = f" ({(first.error or 'no reason given').splitlines()[0][:160]})"
        out.append(f"{len(failed)} of {len(session.ranks)} ranks failed: rank {first.rank}{reason}")
    shards = [
        (r.rank, s)
        for r in session.ranks
        if r.status == "ok"
        for m in r.models
        for s in m.shards
        if s.status != "ok"
    ]
    if shards:
        rank, shard = shards[0]
        out.append(f"{len(shards)} shard load(s) failed, first {shard.file} on rank {rank}")
    return out


def completed_bytes(session: Session) -> int:
    """The checkpoint bytes every rank that ran loaded fully: the work the figures describe."""
    done: set[tuple[str, str]] | None = None
    for rank in session.ranks:
        ok = (
            {(m.role, s.file) for m in rank.models for s in m.shards if s.status == "ok"}
            if rank.status == "ok"
            else set()
        )
        done = ok if done is None else done & ok
    sizes = {(m.role, s.file): s.bytes for m in session.models for s in m.shards}
    return sum(sizes.get(key, 0) for key in (done or set()))


def _floor(
    ckpt: int,
    cold: float,
    storage: float | None,
    pinned: float | None,
    h2d_bytes: int,
    ranks: int,
    host: float | None = None,
) -> float | None:
    """max(bytes from storage / storage ceiling, per-rank bytes / pinned H2D, all copied bytes / the host's warm
    pipeline): no loader gets below this."""
    parts = []
    if storage and cold > 0:
        parts.append(ckpt * cold / storage / 1e9)
    if pinned and ranks:
        parts.append(h2d_bytes / ranks / pinned / 1e9)
    if host and h2d_bytes:
        parts.append(h2d_bytes / host / 1e9)
    return round(max(parts), 4) if parts else None


def _whole_file_seconds(
    session: Session, fetched: float, ckpt: int, storage_1: float, h2d_bytes: int, compute: float
) -> float:
    """``--weight-loader-disable-mmap``: one thread reads each file whole into a new bytes object, deserialises it
    into new tensors, then copies them, none of it overlapped. Both host steps write every byte into freshly
    allocated memory (a page fault per 4 KiB): the read into the new buffer costs one pass at the probe's
    fresh-memory rate, and safetensors' deserialise, which copies each tensor into its own new bytes object, two
    such passes. Ranks on one node write at once: each gets its share of what N writers reach together, never more
    than one writer alone (both checked on the H200: reports/h200/2026-11-30j-h200x2-predictions-checked). Without
    that ceiling (older sessions), the mmap path's own copies stand in."""
    fresh = _fresh_write_per_rank(session)
    pageable = [v for v in (session.ceilings.h2d_pageable_GBps or {}).values() if v]
    if not fresh:
        return fetched / storage_1 / 1e9 + compute
    copy = h2d_bytes / min(pageable) / 1e9 if pageable else 0.0
    return fetched / storage_1 / 1e9 + (1 + WHOLE_FILE_DESERIALIZE_PASSES) * ckpt / fresh / 1e9 + copy


def _recommendation(prediction: Prediction, now: float) -> str:
    """One line per remedy; one predicted to be slower than the load just measured says so instead of selling it."""
    flags, why, predicted = prediction.flags, prediction.why, prediction.predicted_s
    if predicted is None:
        return f"{flags}: {why}"
    if prediction.slower_than_now:
        return f"{flags}: not faster here: ~{predicted:.2f} s predicted against {now:.2f} s now ({why})"
    return f"{flags}: ~{predicted:.2f} s predicted ({why})"


def _fastsafetensors_seconds(
    session: Session, ckpt: int, tp: object, storage_n: float | None
) -> float | None:
    """fastsafetensors' load priced file by file from the probe's timings of the package on these files. Files go
    in batches of one per rank (SGLang's iterator), and a batch ends with its slowest file; with TP > 1 (a GPU
    each) the ranks read at once only as fast as the storage serves them all. The tensors' hand-over between GPUs
    is not priced."""
    sizes = [shard.bytes for m in session.models for shard in m.shards]
    ranks = tp if isinstance(tp, int) and tp > 1 else 1
    per_rank = predicted_seconds(
        session.ceilings.fastsafetensors_sample, [sizes[i : i + ranks] for i in range(0, len(sizes), ranks)]
    )
    if per_rank is None or not sizes:
        return None
    together = ckpt / storage_n / 1e9 if ranks > 1 and storage_n else 0.0
    return max(per_rank, together)


def _fresh_write_per_rank(session: Session) -> float | None:
    """The rate at which each rank copies into fresh memory while all of the session's ranks do so at once."""
    alone = session.ceilings.fresh_write_GBps
    together = session.ceilings.fresh_write_n_threads_GBps
    ranks = len(session.ranks)
    if not alone or not together or ranks <= 1:
        return alone
    return min(alone, together / ranks)


def _release(session: Session) -> LoaderProfile | None:
    """The SGLang release line the session replays (None for sessions from before profiles: every flag)."""
    release = session.config.get("sglang_release")
    name = release.get("profile") if isinstance(release, dict) else None
    return profile_named(name) if isinstance(name, str) else None


def _predictions(
    session: Session,
    bottleneck: str,
    cold: float,
    storage_1: float | None,
    storage_n: float | None,
    pinned: float | None,
    fs_type: str,
) -> list[Prediction]:
    """Each remedy with the time the measured ceilings predict for it, fastest first."""
    ckpt = checkpoint_bytes(session)
    fetched = ckpt * cold
    # Per-rank time that does not depend on storage: deserialisation, copies and bookkeeping of the slowest rank.
    compute = 0.0
    h2d_bytes = 0
    for r in session.ranks:
        rt = run_totals(Session(ranks=[r]))
        compute = max(compute, rt.deserialize_s + rt.h2d_s + rt.other_s)
        h2d_bytes = max(h2d_bytes, rt.h2d_bytes)
    out: list[Prediction] = []
    streams = session.ceilings.storage_streams
    release = _release(session)
    if bottleneck in ("storage", "page-cache") and storage_n:
        n_read = fetched / storage_n / 1e9
        if release is None or PREFETCH_FLAG in release.flags:
            fallback = (
                "; on this release it also turns the default multithread loader off, which this prediction assumes"
                if release is not None and release.prefetch == "single-thread"
                else ""
            )
            out.append(
                Prediction(
                    flags=PREFETCH_FLAG,
                    # The replay that reproduces it: SGLang's prefetch with the one-thread loop. Up to 0.5.15 it ran
                    # beside the multithread loader, which no strategy replays yet.
                    strategy=None
                    if release is not None and release.prefetch == "beside-multithread"
                    else "prefetch",
                    predicted_s=round(max(n_read, compute), 3),
                    why=f"node-local ranks read disjoint files in parallel at ~{storage_n:.2f} GB/s "
                    f"({streams or 'N'} streams) while the load runs{fallback}",
                )
            )
        if release is None or release.multithread_strategy is not None:
            default = (
                f" (this release runs {MT_DEFAULT_THREADS} by default)"
                if release and release.multithread_default
                else ""
            )
            # The threads take mmap views; the bytes still arrive as page faults in each rank's own loop, where
            # the kernel's read-ahead overlaps them with the copies. Several ranks fault at once and together reach
            # the N-stream rate; one rank faults alone, whatever the pool's size (both checked on the H200 x2 box,
            # reports/h200/2026-11-30j-h200x2-predictions-checked).
            if len(session.ranks) > 1:
                mt_s = max(n_read, compute)
                mt_why = (
                    f"16 threads open files ahead; the {len(session.ranks)} ranks' faults with read-ahead reach "
                    f"~{storage_n:.2f} GB/s together and overlap the serial pageable copies{default}"
                )
            else:
                mt_s = faithful_load_wall(session) or load_wall(session)
                mt_why = (
                    "the pool only opens files: one rank still faults every byte in itself, in its own loop, "
                    f"whatever the number of threads, so no faster than this load{default}"
                )
            out.append(
                Prediction(
                    flags=MT_FLAG if release is None else multithread_extra_config(release, 16),
                    strategy="sglang-mt:num_threads=16"
                    if release is None or release.multithread_strategy == "sglang-mt"
                    else "sglang-mt-completed:num_threads=16",
                    predicted_s=round(mt_s, 3),
                    why=mt_why,
                )
            )
    if (
        bottleneck in ("storage", "page-cache")
        and storage_1
        and (release is None or NO_MMAP_FLAG in release.flags)
    ):
        out.append(
            Prediction(
                flags=NO_MMAP_FLAG,
                strategy="no-mmap",
                predicted_s=round(
                    _whole_file_seconds(session, fetched, ckpt, storage_1, h2d_bytes, compute), 3
                ),
                why=f"whole-file sequential reads at ~{storage_1:.2f} GB/s instead of 4 KiB page faults",
            )
        )
    fastsafetensors = release is None or "fastsafetensors" in release.load_formats
    tp = session.config.get("tp") or len(session.ranks) or 1
    shared_gpus = isinstance(tp, int) and tp > 1 and bool(session.config.get("ranks_share_devices"))
    if pinned and fastsafetensors and shared_gpus and (storage_n or bottleneck == "h2d"):
        # Ranks sharing a GPU hand each tensor to every rank over gloo (host memory): no ceiling measures that.
        out.append(
            Prediction(
                flags=FASTST_FLAG,
                strategy="fastsafetensors",
                predicted_s=None,
                why=f"not predicted: with {tp} ranks sharing GPUs it hands every tensor to every rank through "
                "gloo, which no ceiling measures (replay it: --strategy fastsafetensors)",
            )
        )
    elif fastsafetensors and (fitted := _fastsafetensors_seconds(session, ckpt, tp, storage_n)) is not None:
        out.append(
            Prediction(
                flags=FASTST_FLAG,
                strategy="fastsafetensors",
                predicted_s=round(fitted, 3),
                why="each file priced by its size from the package's own timings on "
                f"{session.ceilings.fastsafetensors_sample_files} of these files, one loader per file as SGLang "
                f"does ({session.ceilings.fastsafetensors_GBps or 0.0:.2f} GB/s over the sample); it bypasses a "
                "warm page cache, so it reads every byte from storage",
            )
        )
    elif storage_n and pinned and fastsafetensors:
        out.append(
            Prediction(
                flags=FASTST_FLAG,
                strategy="fastsafetensors",
                # File batches one after the other, each read whole (O_DIRECT, in parallel) before its copies:
                # the reads and the pinned copies add up. Only for sessions whose probe did not measure the
                # package itself: its own rate has run well below this (reports/h200/2026-11-30g-h200-release-
                # profile-predictions).
                predicted_s=round(ckpt / storage_n / 1e9 + h2d_bytes / pinned / 1e9, 3),
                why=f"parallel O_DIRECT reads into pinned buffers, {pinned:.1f} GB/s pinned copies; "
                "it bypasses a warm page cache, so it reads every byte from storage (its own rate was not "
                "measured: a lower bound)",
            )
        )
    elif bottleneck == "h2d" and pinned and fastsafetensors:
        out.append(
            Prediction(
                flags=FASTST_FLAG,
                strategy="fastsafetensors",
                predicted_s=round(h2d_bytes / pinned / 1e9, 3),
                why=f"pinned host buffers copy at {pinned:.1f} GB/s instead of pageable staging",
            )
        )
    if is_network_fs(fs_type) and bottleneck in ("storage", "page-cache", "rank-skew"):
        out.append(
            Prediction(
                flags="copy the checkpoint to local NVMe once (cp -r) and point --model-path there",
                strategy=None,
                predicted_s=None,
                why=f"{fs_type} serves 4 KiB mmap faults slowly and every node re-reads it; "
                "run `ckptprof probe` on the local disk to predict the gain",
            )
        )
    out.sort(key=lambda p: (p.predicted_s is None, p.predicted_s or 0.0))
    return out
