"""What a run did not finish, and the work its figures still describe. Pure: reads a Session."""

from __future__ import annotations

from ckptprof.session import Session


def incomplete_work(session: Session) -> list[str]:
    """What the run did not finish: failed or missing ranks, failed shards (empty for a complete run)."""
    out = []
    interrupted = session.extra.interrupted
    if interrupted is not None:
        out.append(f"interrupted ({interrupted.by or 'Ctrl-C'}) during the {interrupted.stage or 'run'}")
    expected = session.config.tp
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
