"""The verdict of one session: its figures, the limit they name, the words for it and the remedies, in one record.

``compute_verdict`` only wires the steps together: ``figures`` reads the numbers, ``classify`` names the binding
limit, ``remedies`` prices what to try, ``wording`` says it all. Pure: no torch, no I/O.
"""

from __future__ import annotations

from ckptprof.analysis.attribution import faithful_delta, faithful_load_wall, path_attribution
from ckptprof.analysis.verdict import wording
from ckptprof.analysis.verdict.classify import PHASE_BOTTLENECK, classify
from ckptprof.analysis.verdict.completeness import incomplete_work
from ckptprof.analysis.verdict.figures import load_floor, read_figures
from ckptprof.analysis.verdict.remedies import remedies
from ckptprof.fstypes import is_network_fs
from ckptprof.results import Verdict, positive
from ckptprof.session import Session


def compute_verdict(session: Session) -> Verdict:
    """Which limit binds ``session``'s load, the figures that back it, and what to try."""
    fig = read_figures(session)
    cls = classify(fig, bool(session.ranks))
    missing = incomplete_work(session)
    predictions, engine_note = remedies(session, fig, cls.remedied)
    now = faithful_load_wall(session) or fig.wall
    fdelta = faithful_delta(session)
    on_path, path_source = path_attribution(session)
    totals = fig.totals
    return Verdict(
        bottleneck=cls.bottleneck,
        secondary=cls.secondary,
        close=tuple(PHASE_BOTTLENECK[k] for k in cls.close) if len(cls.close) > 1 else (),
        summary=wording.summary(session, fig, cls, missing, on_path, path_source),
        recommendations=tuple(wording.recommendation(p, now) for p in predictions),
        predictions=tuple(predictions),
        incomplete=tuple(missing),
        faithful_delta=None if fdelta is None else round(fdelta, 4),
        path_shares=None if on_path is None else {k: round(v, 4) for k, v in on_path.items()},
        path_storage_source=path_source,
        faithful_note=wording.faithful_note(fdelta),
        storage_note=wording.storage_note(session, fig),
        engine_note=engine_note,
        floor_s=load_floor(fig, positive(session.ceilings.warm_pipeline_GBps)),
        shares={k: round(v, 4) for k, v in fig.decomposed_shares.items()},
        sampled_shares=None if fig.sampled is None else {k: round(v, 4) for k, v in fig.sampled.items()},
        # No throughput for a load that did not finish.
        achieved_GBps=None if missing else round(fig.achieved, 4),
        fetched_GBps=round(fig.fetch_rate, 4),
        h2d_GBps=None if fig.h2d_rate is None else round(fig.h2d_rate, 4),
        cold_fraction=round(fig.cold, 4),
        load_wall_s=round(fig.wall, 4),
        checkpoint_bytes=fig.ckpt,
        read_amplification=round(totals.bytes / fig.ckpt, 3) if fig.ckpt else None,
        storage_amplification=None if fig.amplification is None else round(fig.amplification, 3),
        storage_amplification_source=fig.amplification_source,
        major_faults_per_GB=round(totals.major_faults / (totals.bytes / 1e9), 1) if totals.bytes else None,
        rank_skew=round(fig.skew, 3),
        fs_type=fig.fs_type,
        network_fs=any(is_network_fs(f) for f in fig.fs_types),
        h2d_stand_in=fig.stand_in,
        read_GBps=round(fig.read_rate, 4),
    )
