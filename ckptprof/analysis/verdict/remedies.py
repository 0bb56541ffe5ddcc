"""What to try: each loader flag that attacks the binding limit, with the time the measured ceilings predict for it.

A remedy is one function (``_prefetch``, ``_multithread``, ``_no_mmap``, ``_fastsafetensors``, ``_local_copy``)
that returns its ``Prediction`` or None where it does not apply; the release the session replays decides which
flags exist. A vLLM server gets the same mechanisms in vLLM's spelling. Pure: prices from the session's ceilings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ckptprof.analysis.attribution import checkpoint_bytes, faithful_load_wall, load_wall, run_totals
from ckptprof.analysis.verdict.figures import Figures
from ckptprof.analysis.vllm_flags import vllm_predictions
from ckptprof.engines import flags
from ckptprof.engines.sglang import MT_DEFAULT_THREADS, LoaderProfile, multithread_extra_config, profile_named
from ckptprof.fstypes import is_network_fs
from ckptprof.rates import predicted_seconds
from ckptprof.results import Prediction
from ckptprof.session import Session

MT_FLAG = flags.multithread(16)
PREFETCH_FLAG = flags.PREFETCH
NO_MMAP_FLAG = flags.DISABLE_MMAP
FASTST_FLAG = flags.load_format("fastsafetensors")

# safetensors.torch.load(bytes) costs this many fresh-memory passes over the bytes (see _whole_file_seconds).
WHOLE_FILE_DESERIALIZE_PASSES = 2


@dataclass(frozen=True)
class Pricing:
    """What every remedy's price is made of."""

    session: Session
    # The limit the remedies attack (classify's ``remedied``).
    bottleneck: str
    ckpt: int
    # The checkpoint's cold bytes: what a load must fetch from storage.
    fetched: float
    # Per-rank time that does not depend on storage: deserialisation, copies and bookkeeping of the slowest rank.
    compute: float
    # The most bytes one rank copied to its device.
    h2d_bytes: int
    storage_1: float | None
    storage_n: float | None
    pinned: float | None
    fs_type: str
    # The SGLang release line replayed (None for sessions from before profiles: every flag).
    release: LoaderProfile | None


def remedies(session: Session, fig: Figures, bottleneck: str) -> tuple[list[Prediction], str | None]:
    """The remedies for ``bottleneck``, fastest first, each marked when it is no faster than the load measured;
    and a note when they are respelled for a vLLM server."""
    predictions = predict(session, fig, bottleneck)
    engine_note = None
    vllm_release = session.config.vllm_release
    if vllm_release is not None:
        # A vLLM server takes vLLM's flags: the same mechanisms respelled, SGLang-only ones dropped.
        predictions, engine_note = vllm_predictions(vllm_release, session.config.strategy or "", predictions)
    now = faithful_load_wall(session) or fig.wall
    predictions = [
        # Still listed and still checked by --check-predictions, but never sold as a remedy.
        replace(p, slower_than_now=p.predicted_s is not None and now > 0 and p.predicted_s >= round(now, 3))
        for p in predictions
    ]
    return predictions, engine_note


def predict(session: Session, fig: Figures, bottleneck: str) -> list[Prediction]:
    """Each remedy with the time the measured ceilings predict for it, fastest first."""
    ckpt = checkpoint_bytes(session)
    compute, h2d_bytes = _rank_work(session)
    pricing = Pricing(
        session=session,
        bottleneck=bottleneck,
        ckpt=ckpt,
        fetched=ckpt * fig.cold,
        compute=compute,
        h2d_bytes=h2d_bytes,
        storage_1=fig.storage_1,
        storage_n=fig.storage_n,
        pinned=fig.pinned,
        fs_type=fig.fs_type,
        release=_release(session),
    )
    out = [p for remedy in REMEDIES if (p := remedy(pricing)) is not None]
    out.sort(key=lambda p: (p.predicted_s is None, p.predicted_s or 0.0))
    return out


def _rank_work(session: Session) -> tuple[float, int]:
    """(storage-independent seconds, bytes copied to the device) of the slowest rank in each."""
    compute = 0.0
    h2d_bytes = 0
    for r in session.ranks:
        rt = run_totals(Session(ranks=[r]))
        compute = max(compute, rt.deserialize_s + rt.h2d_s + rt.other_s)
        h2d_bytes = max(h2d_bytes, rt.h2d_bytes)
    return compute, h2d_bytes


def _release(session: Session) -> LoaderProfile | None:
    """The SGLang release line the session replays (None for sessions from before profiles: every flag)."""
    release = session.config.sglang_release
    name = release.get("profile") if release is not None else None
    return profile_named(name) if isinstance(name, str) else None


def _reads_bind(p: Pricing) -> bool:
    return p.bottleneck in ("storage", "page-cache")


def _prefetch(p: Pricing) -> Prediction | None:
    """``--weight-loader-prefetch-checkpoints``: ranks on a node read disjoint files ahead of the load."""
    release, storage_n = p.release, p.storage_n
    if not (_reads_bind(p) and storage_n) or not (release is None or PREFETCH_FLAG in release.flags):
        return None
    fallback = (
        "; on this release it also turns the default multithread loader off, which this prediction assumes"
        if release is not None and release.prefetch == "single-thread"
        else ""
    )
    return Prediction(
        flags=PREFETCH_FLAG,
        # The replay that reproduces it: SGLang's prefetch with the one-thread loop. Up to 0.5.15 it ran beside
        # the multithread loader, which no strategy replays yet.
        strategy=None if release is not None and release.prefetch == "beside-multithread" else "prefetch",
        predicted_s=round(max(p.fetched / storage_n / 1e9, p.compute), 3),
        why=f"node-local ranks read disjoint files in parallel at ~{storage_n:.2f} GB/s "
        f"({p.session.ceilings.storage_streams or 'N'} streams) while the load runs{fallback}",
    )


def _multithread(p: Pricing) -> Prediction | None:
    """The multithread loader: a pool of 16 threads opening files ahead of each rank's loop."""
    release, storage_n, ranks = p.release, p.storage_n, len(p.session.ranks)
    if not (_reads_bind(p) and storage_n) or not (
        release is None or release.multithread_strategy is not None
    ):
        return None
    default = (
        f" (this release runs {MT_DEFAULT_THREADS} by default)"
        if release and release.multithread_default
        else ""
    )
    # The threads take mmap views; the bytes still arrive as page faults in each rank's own loop, where the
    # kernel's read-ahead overlaps them with the copies. Several ranks fault at once and together reach the
    # N-stream rate; one rank faults alone, whatever the pool's size (both checked on the H200 x2 box,
    # reports/h200/2026-11-30j-h200x2-predictions-checked).
    if ranks > 1:
        mt_s = max(p.fetched / storage_n / 1e9, p.compute)
        mt_why = (
            f"16 threads open files ahead; the {ranks} ranks' faults with read-ahead reach "
            f"~{storage_n:.2f} GB/s together and overlap the serial pageable copies{default}"
        )
    else:
        mt_s = faithful_load_wall(p.session) or load_wall(p.session)
        mt_why = (
            "the pool only opens files: one rank still faults every byte in itself, in its own loop, "
            f"whatever the number of threads, so no faster than this load{default}"
        )
    return Prediction(
        flags=MT_FLAG if release is None else multithread_extra_config(release, 16),
        strategy="sglang-mt:num_threads=16"
        if release is None or release.multithread_strategy == "sglang-mt"
        else "sglang-mt-completed:num_threads=16",
        predicted_s=round(mt_s, 3),
        why=mt_why,
    )


def _no_mmap(p: Pricing) -> Prediction | None:
    """``--weight-loader-disable-mmap``: whole-file reads instead of page faults."""
    if not (_reads_bind(p) and p.storage_1 and (p.release is None or NO_MMAP_FLAG in p.release.flags)):
        return None
    return Prediction(
        flags=NO_MMAP_FLAG,
        strategy="no-mmap",
        predicted_s=round(
            _whole_file_seconds(p.session, p.fetched, p.ckpt, p.storage_1, p.h2d_bytes, p.compute), 3
        ),
        why=f"whole-file sequential reads at ~{p.storage_1:.2f} GB/s instead of 4 KiB page faults",
    )


def _fastsafetensors(p: Pricing) -> Prediction | None:
    """``--load-format fastsafetensors``: priced from the package's own timings when the probe took them, else
    bounded by the storage and pinned-copy ceilings; not priced when ranks share GPUs."""
    if not (p.release is None or "fastsafetensors" in p.release.load_formats):
        return None
    session, pinned, storage_n = p.session, p.pinned, p.storage_n
    tp = session.config.tp or len(session.ranks) or 1
    shared_gpus = tp > 1 and bool(session.config.ranks_share_devices)
    if pinned and shared_gpus and (storage_n or p.bottleneck == "h2d"):
        # Ranks sharing a GPU hand each tensor to every rank over gloo (host memory): no ceiling measures that.
        return Prediction(
            flags=FASTST_FLAG,
            strategy="fastsafetensors",
            predicted_s=None,
            why=f"not predicted: with {tp} ranks sharing GPUs it hands every tensor to every rank through "
            "gloo, which no ceiling measures (replay it: --strategy fastsafetensors)",
        )
    if (fitted := _fastsafetensors_seconds(session, p.ckpt, tp, storage_n)) is not None:
        return Prediction(
            flags=FASTST_FLAG,
            strategy="fastsafetensors",
            predicted_s=round(fitted, 3),
            why="each file priced by its size from the package's own timings on "
            f"{session.ceilings.fastsafetensors_sample_files} of these files, one loader per file as SGLang "
            f"does ({session.ceilings.fastsafetensors_GBps or 0.0:.2f} GB/s over the sample); it bypasses a "
            "warm page cache, so it reads every byte from storage",
        )
    if storage_n and pinned:
        return Prediction(
            flags=FASTST_FLAG,
            strategy="fastsafetensors",
            # File batches one after the other, each read whole (O_DIRECT, in parallel) before its copies: the
            # reads and the pinned copies add up. Only for sessions whose probe did not measure the package
            # itself: its own rate has run well below this (reports/h200/2026-11-30g-h200-release-profile-
            # predictions).
            predicted_s=round(p.ckpt / storage_n / 1e9 + p.h2d_bytes / pinned / 1e9, 3),
            why=f"parallel O_DIRECT reads into pinned buffers, {pinned:.1f} GB/s pinned copies; "
            "it bypasses a warm page cache, so it reads every byte from storage (its own rate was not "
            "measured: a lower bound)",
        )
    if p.bottleneck == "h2d" and pinned:
        return Prediction(
            flags=FASTST_FLAG,
            strategy="fastsafetensors",
            predicted_s=round(p.h2d_bytes / pinned / 1e9, 3),
            why=f"pinned host buffers copy at {pinned:.1f} GB/s instead of pageable staging",
        )
    return None


def _local_copy(p: Pricing) -> Prediction | None:
    """A checkpoint on a network file system: copy it to local NVMe once."""
    if not (is_network_fs(p.fs_type) and p.bottleneck in ("storage", "page-cache", "rank-skew")):
        return None
    return Prediction(
        flags="copy the checkpoint to local NVMe once (cp -r) and point --model-path there",
        strategy=None,
        predicted_s=None,
        why=f"{p.fs_type} serves 4 KiB mmap faults slowly and every node re-reads it; "
        "run `ckptprof probe` on the local disk to predict the gain",
    )


# In the order they are listed before sorting by predicted time (the sort is stable: ties keep this order).
REMEDIES: tuple[Callable[[Pricing], Prediction | None], ...] = (
    _prefetch,
    _multithread,
    _no_mmap,
    _fastsafetensors,
    _local_copy,
)


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
