"""The figures a verdict stands on: what the load moved and how fast, and the ceilings it is held against.

Read once from a Session into one record (``Figures``), so that classifying, wording and pricing remedies all
reason about the same numbers. Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptprof.analysis.attribution import (
    PhaseTotals,
    checkpoint_bytes,
    load_wall,
    rank_skew,
    run_totals,
    sampled_attribution,
)
from ckptprof.fstypes import is_network_fs
from ckptprof.results import positive, slowest_device
from ckptprof.session import Session


@dataclass(frozen=True)
class Figures:
    """One session's figures as the verdict reads them (rates in GB/s, times in seconds, sizes in bytes)."""

    totals: PhaseTotals
    # The decomposed replay's shares of rank time, and SGLang's own sampled in the kernel when the run did.
    decomposed_shares: dict[str, float]
    sampled: dict[str, float] | None
    # The shares that name the bottleneck (the sampled ones when there are any) and what they are shares of.
    shares: dict[str, float]
    basis: str
    wall: float
    ckpt: int
    devices: list[str]
    fs_types: list[str]
    fs_type: str
    # No CUDA device: the copies are host memcpys standing in for H2D.
    stand_in: bool
    cold: float
    skew: float
    n_ranks: int
    storage_best: float | None
    storage_1: float | None
    storage_n: float | None
    page_cache: float | None
    pageable: float | None
    pinned: float | None
    achieved: float
    amplification: float | None
    amplification_source: str
    # Whether the amplification is the kernel's count (else an upper bound from page-cache residency).
    exact: bool
    fetched: float
    fetch_rate: float
    h2d_rate: float | None
    read_rate: float


def read_figures(session: Session) -> Figures:
    """The figures of ``session``'s load against its ceilings."""
    totals = run_totals(session)
    # SGLang's own load sampled in the kernel, when the run did (--sample-threads), names the bottleneck; else the
    # decomposed replay's shares of rank time, serialised.
    sampled = sampled_attribution(session)
    decomposed_shares = totals.shares()
    wall = load_wall(session)
    ckpt = checkpoint_bytes(session)
    ceilings = session.ceilings
    devices = sorted({r.device for r in session.ranks if r.device})
    fs_types = sorted({m.fs_type for m in session.models})
    cold = cold_fraction(session)
    storage_best = positive(ceilings.storage_read_GBps)
    amplification, amplification_source = storage_amplification(session, ckpt, fs_types)
    exact = amplification_source.startswith("kernel")
    # Bytes that came from storage: the checkpoint's cold part, or more where the kernel counted every rank's.
    fetched = max(ckpt * cold, (amplification or 0.0) * ckpt if exact else 0.0)
    # The read phase of the slowest-reading rank is when the unique bytes came in (ranks share the page cache).
    # Wall-clock: 16 reader threads reading for the same second read for one second, not sixteen.
    read_wall = max((run_totals(Session(ranks=[r])).read_busy for r in session.ranks), default=0.0)
    return Figures(
        totals=totals,
        decomposed_shares=decomposed_shares,
        sampled=sampled,
        shares=sampled if sampled is not None else decomposed_shares,
        basis="of SGLang's own wall (its threads sampled)" if sampled is not None else "of rank time",
        wall=wall,
        ckpt=ckpt,
        devices=devices,
        fs_types=fs_types,
        fs_type=",".join(fs_types) or "unknown",
        stand_in=not any(d.startswith("cuda") for d in devices),
        cold=cold,
        skew=rank_skew(session),
        n_ranks=len(session.ranks),
        storage_best=storage_best,
        storage_1=positive(ceilings.storage_read_1_stream_GBps) or storage_best,
        storage_n=positive(ceilings.storage_read_n_streams_GBps) or storage_best,
        page_cache=positive(ceilings.page_cache_read_GBps),
        pageable=slowest_device(ceilings.h2d_pageable_GBps, devices),
        pinned=slowest_device(ceilings.h2d_pinned_GBps, devices),
        achieved=ckpt / wall / 1e9 if wall > 0 else 0.0,
        amplification=amplification,
        amplification_source=amplification_source,
        exact=exact,
        fetched=fetched,
        fetch_rate=fetched / wall / 1e9 if wall > 0 else 0.0,
        # Rates are bytes over the wall-clock time in which they moved (threads copying at once count that time
        # once).
        h2d_rate=totals.h2d_bytes / totals.h2d_busy / 1e9 if totals.h2d_busy > 0 else None,
        read_rate=fetched / read_wall / 1e9 if read_wall > 0 else 0.0,
    )


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


def load_floor(figures: Figures, host: float | None = None) -> float | None:
    """max(bytes from storage / storage ceiling, per-rank bytes / pinned H2D, all copied bytes / the host's warm
    pipeline): no loader gets below this."""
    ckpt, cold, storage, pinned = figures.ckpt, figures.cold, figures.storage_n, figures.pinned
    h2d_bytes, ranks = figures.totals.h2d_bytes, figures.n_ranks
    parts = []
    if storage and cold > 0:
        parts.append(ckpt * cold / storage / 1e9)
    if pinned and ranks:
        parts.append(h2d_bytes / ranks / pinned / 1e9)
    if host and h2d_bytes:
        parts.append(h2d_bytes / host / 1e9)
    return round(max(parts), 4) if parts else None
