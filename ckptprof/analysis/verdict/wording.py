"""The verdict's sentences: the summary a user reads first, the notes beside it, and one line per remedy.

Each bottleneck has its own headline (``HEADLINES``); the run's completeness, the overall rate and the faithful
pass's view are added around it. Pure: formats ``Figures`` and a ``Classification``, decides nothing of its own
but whether a caveat applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ckptprof.analysis.attribution import faithful_load_wall
from ckptprof.analysis.verdict.classify import CLOSE_SHARE, Classification
from ckptprof.analysis.verdict.completeness import completed_bytes
from ckptprof.analysis.verdict.figures import Figures
from ckptprof.results import Prediction, positive
from ckptprof.session import Session
from ckptprof.units import age_words

PHASE_WORDS = {
    "storage": "storage reads",
    "page_cache": "page-cache faults",
    "h2d": "copies",
    "deserialize": "deserialisation",
    "other": "other work",
}
# Strategies whose reads of cached bytes are page faults on safetensors' mmap (the rest read with pread/read()).
MMAP_STRATEGIES = frozenset({"sglang", "sglang-mt", "sglang-mt-completed", "prefetch"})
# Reads faster than this multiple of the measured storage ceiling mean the ceiling or the storage misled us.
ABOVE_CEILING = 1.05
STAND_IN = " (no CUDA device: 'h2d' is a host-copy stand-in)"


def _fmt(x: float | None, unit: str = "GB/s") -> str:
    return "n/a" if x is None else f"{x:.2f} {unit}"


def _pct(a: float, b: float | None) -> str:
    return f" ({100 * a / b:.0f}%)" if b else ""


def _pinned_note(fig: Figures) -> str:
    """What pinned copies would allow, and that 'h2d' is a stand-in without a CUDA device."""
    note = f"; pinned H2D would allow {_fmt(fig.pinned)}" if fig.pinned else ""
    return note + STAND_IN if fig.stand_in else note


def _storage(session: Session, fig: Figures, cls: Classification) -> str:
    read_rate, storage_best, amplification = fig.read_rate, fig.storage_best, fig.amplification
    summary = (
        f"storage-bound: reads fetched {fig.fetched / 1e9:.2f} GB at {read_rate:.2f} GB/s vs {_fmt(storage_best)} "
        f"cold read ceiling on {fig.fs_type}{_pct(read_rate, storage_best)}; fetching them took "
        f"{100 * fig.shares['storage']:.0f}% {fig.basis}{_pinned_note(fig)}"
    )
    if amplification is not None and amplification > 1.5 and fig.n_ranks > 1:
        bound = "" if fig.exact else "up to "
        summary += (
            f"; the {fig.n_ranks} ranks fetched {bound}{amplification:.1f}x the checkpoint from storage "
            "(the page cache did not serve them all from one read)"
        )
    return summary


def _page_cache(session: Session, fig: Figures, cls: Classification) -> str:
    totals = fig.totals
    fault_rate = totals.bytes / totals.read_busy / 1e9 if totals.read_busy > 0 else 0.0
    # SGLang's mmap paths bring cached bytes in by page faults; the others read them (pread, read()).
    faults = (session.config.strategy or "sglang") in MMAP_STRATEGIES
    how, via = ("mmap page faults", "through faults") if faults else ("reads from the page cache", "read")
    host = positive(session.ceilings.warm_pipeline_GBps)
    # Reading the page cache and copying to the device at once share the host's memory: the pair's own ceiling.
    host_note = (
        f"; reading the page cache and copying at once, this host reaches {_fmt(host)}" if host else ""
    )
    return (
        f"page-cache-bound: {100 * (1 - fig.cold):.0f}% of the checkpoint was cached, yet {how} took "
        f"{100 * fig.shares['page_cache']:.0f}% {fig.basis} ({fault_rate:.2f} GB/s {via} vs "
        f"{_fmt(fig.page_cache)} plain page-cache reads){_pinned_note(fig)}{host_note}"
    )


def _h2d(session: Session, fig: Figures, cls: Classification) -> str:
    share = 100 * fig.shares["h2d"]
    if fig.stand_in:
        # No CUDA device: the copies are host memcpys standing in for H2D; there is no link to be bound by.
        memcpy = positive(session.ceilings.memcpy_GBps)
        return (
            f"host-copy-bound{STAND_IN}: the copies took {share:.0f}% {fig.basis} at {_fmt(fig.h2d_rate)} vs "
            f"{_fmt(memcpy)} host memcpy{_pct(fig.h2d_rate or 0.0, memcpy)}"
        )
    return (
        f"h2d-bound: host-to-device copies took {share:.0f}% {fig.basis} at {_fmt(fig.h2d_rate)} vs "
        f"{_fmt(fig.pageable)} pageable ceiling{_pct(fig.h2d_rate or 0.0, fig.pageable)}{_pinned_note(fig)}"
    )


def _deserialize(session: Session, fig: Figures, cls: Classification) -> str:
    return f"deserialize-bound: safe_open/get_tensor/narrow took {100 * fig.shares['deserialize']:.0f}% {fig.basis}"


def _cpu(session: Session, fig: Figures, cls: Classification) -> str:
    return f"cpu-bound: {100 * fig.shares['other']:.0f}% {fig.basis} was outside reads, deserialisation and copies"


def _mixed(session: Session, fig: Figures, cls: Classification) -> str:
    listed = ", ".join(f"{PHASE_WORDS[k]} {100 * fig.shares[k]:.0f}%" for k in cls.close)
    summary = (
        f"no single bottleneck: {listed} {fig.basis}, within {100 * CLOSE_SHARE:.0f} points of each other "
        "(identical runs move shares this much; none of them binds alone)"
    )
    return summary + STAND_IN if fig.stand_in and "h2d" in cls.close else summary


def _rank_skew(session: Session, fig: Figures, cls: Classification) -> str:
    then = limit_word(cls.secondary, fig.stand_in)
    return f"rank-skew: the slowest rank took {fig.skew:.2f}x the median rank's wall (then {then})"


def limit_word(bottleneck: str | None, stand_in: bool) -> str:
    """The one word every view shows for a limit (badge, summary, per-model headline, tables): 'host-copy-bound'
    wherever the copies were host memcpys standing in for H2D (no CUDA device), never 'h2d-bound' beside it."""
    if not bottleneck:
        return "no verdict"
    if bottleneck == "unknown":
        return "no timings"
    if bottleneck == "mixed":
        return "no single bottleneck"
    if bottleneck == "rank-skew":
        return "rank-skew"
    if bottleneck == "h2d" and stand_in:
        return "host-copy-bound"
    return f"{bottleneck}-bound"


def bound_figure(session: Session, fig: Figures, cls: Classification) -> str:
    """The figure that shows the binding limit, in a clause short enough for a headline line: the binding phase's
    share and, where a ceiling exists, its rate against that ceiling."""
    shares, basis = fig.shares, fig.basis
    bottleneck = cls.bottleneck
    if bottleneck == "storage":
        return (
            f"storage reads took {100 * shares['storage']:.0f}% {basis}, {fig.fetched / 1e9:.2f} GB at "
            f"{fig.read_rate:.2f} GB/s{_of_ceiling(fig.read_rate, fig.storage_best, 'cold-read ceiling')}"
        )
    if bottleneck == "page-cache":
        totals = fig.totals
        rate = totals.bytes / totals.read_busy / 1e9 if totals.read_busy > 0 else 0.0
        return (
            f"page-cache reads took {100 * shares['page_cache']:.0f}% {basis} with {100 * (1 - fig.cold):.0f}% "
            f"of the checkpoint cached, at {rate:.2f} GB/s{_of_ceiling(rate, fig.page_cache, 'page-cache read')}"
        )
    if bottleneck == "h2d":
        rate = fig.h2d_rate or 0.0
        if fig.stand_in:
            memcpy = positive(session.ceilings.memcpy_GBps)
            return (
                f"host copies took {100 * shares['h2d']:.0f}% {basis} at {rate:.2f} GB/s"
                f"{_of_ceiling(rate, memcpy, 'host memcpy')}"
            )
        return (
            f"host-to-device copies took {100 * shares['h2d']:.0f}% {basis} at {rate:.2f} GB/s"
            f"{_of_ceiling(rate, fig.pageable, 'pageable ceiling')}"
        )
    if bottleneck == "deserialize":
        return f"deserialisation took {100 * shares['deserialize']:.0f}% {basis}"
    if bottleneck == "cpu":
        return f"work outside reads, deserialisation and copies took {100 * shares['other']:.0f}% {basis}"
    if bottleneck == "mixed":
        listed = ", ".join(f"{PHASE_WORDS[k]} {100 * shares[k]:.0f}%" for k in cls.close)
        return f"{listed} {basis}, within {100 * CLOSE_SHARE:.0f} points of each other"
    if bottleneck == "rank-skew":
        then = limit_word(cls.secondary, fig.stand_in)
        return f"the slowest rank took {fig.skew:.2f}x the median rank's wall (then {then})"
    return "no rank produced timings"


def _of_ceiling(rate: float, ceiling: float | None, name: str) -> str:
    return f", {100 * rate / ceiling:.0f}% of the {ceiling:.2f} GB/s {name}" if ceiling else ""


Headline = Callable[[Session, Figures, Classification], str]
# The first clause of the summary for each bottleneck: the limit and the figures that back it.
HEADLINES: dict[str, Headline] = {
    "storage": _storage,
    "page-cache": _page_cache,
    "h2d": _h2d,
    "deserialize": _deserialize,
    "cpu": _cpu,
    "mixed": _mixed,
    "rank-skew": _rank_skew,
}


def summary(
    session: Session,
    fig: Figures,
    cls: Classification,
    missing: list[str],
    on_path: Mapping[str, float] | None,
    path_source: str | None,
) -> str:
    """The verdict's one paragraph: the headline, what the run left undone or its overall rate, and how busy
    storage was in SGLang's own sequence."""
    headline = HEADLINES.get(cls.bottleneck)
    text = with_completeness(
        session, fig, missing, headline(session, fig, cls) if headline else "no rank produced timings"
    )
    if (
        cls.bottleneck == "storage" and on_path is not None and fig.sampled is None
    ):  # sampled: already SGLang's own
        text += (
            f"; storage was busy for {100 * on_path['storage']:.0f}% of SGLang's own load (faithful wall; "
            f"{path_source})"
        )
    return text


def with_completeness(session: Session, fig: Figures, missing: list[str], summary: str) -> str:
    """The summary headed by what the run did not finish, or followed by its overall rate when it finished."""
    ckpt, wall = fig.ckpt, fig.wall
    if missing and not session.ranks:
        return f"incomplete run: {'; '.join(missing)}: no load was measured"
    if missing:
        # A load that did not finish has no throughput: a failed rank's 0.00 s is not a fast load.
        done = completed_bytes(session)
        return (
            f"incomplete run: {'; '.join(missing)}; the figures cover the completed work only "
            f"({done / 1e9:.2f} GB of {ckpt / 1e9:.2f} GB in {wall:.2f} s, no throughput for an unfinished load); "
            + summary
        )
    return (
        summary
        + f"; {fig.achieved:.2f} GB/s overall ({ckpt / 1e9:.2f} GB in {wall:.2f} s, {fig.n_ranks} rank(s))"
    )


def faithful_note(fdelta: float | None) -> str | None:
    """How much longer the decomposed phases took than SGLang's own sequence, when that matters (over 5%)."""
    if fdelta is not None and fdelta > 0.05:
        return (
            f"the decomposed phases took {100 * fdelta:.0f}% longer than SGLang's own sequence: there the copy "
            "overlaps the page-fault I/O of the next chunk, here they are timed one after the other, so the shares "
            "describe serialised work"
        )
    return None


def storage_note(session: Session, fig: Figures) -> str | None:
    """A mostly cold load that read faster than the storage ceiling: why one of the two figures misleads."""
    read_rate, storage_best, fetched = fig.read_rate, fig.storage_best, fig.fetched
    if not (fig.cold >= 0.5 and storage_best and read_rate > ABOVE_CEILING * storage_best):
        return None
    # Nothing should read faster than the ceiling: one of the two figures is not what it claims to be.
    note = (
        f"the replay read at {100 * read_rate / storage_best:.0f}% of the cold read ceiling "
        f"{_ceiling_origin(session.ceilings.reused)}: the probe under-measured this storage (its reads are not "
        "SGLang's page faults), the "
        "kernel's read-ahead fetched part of the bytes while other phases were timed, or the storage lets "
        "reads catch up after idle gaps (a token bucket: a cgroup io.max cap, a cloud volume's throughput "
        "credits) - in the last two cases storage held SGLang's load for longer than the decomposed replay's storage share says"
    )
    faithful_wall = faithful_load_wall(session)
    if faithful_wall > 0:
        # Under a throughput cap, this is the cap: the figure to hold against the volume's advertised rate.
        note += (
            f"; SGLang's own sequence fetched {fetched / 1e9:.2f} GB in {faithful_wall:.2f} s "
            f"({fetched / faithful_wall / 1e9:.2f} GB/s)"
        )
    return note


def _ceiling_origin(reused: Mapping[str, object] | None) -> str:
    """'measured in the same run', or how old the reused probe was (a reused figure is never this run's)."""
    age = reused.get("age_s") if reused else None
    if not isinstance(age, (int, float)):
        return "measured in the same run"
    return f"reused from a probe {age_words(float(age))} old (not measured in this run)"


def recommendation(prediction: Prediction, now: float) -> str:
    """One line per remedy; one predicted to be slower than the load just measured says so instead of selling it."""
    flags, why, predicted = prediction.flags, prediction.why, prediction.predicted_s
    if predicted is None:
        return f"{flags}: {why}"
    if prediction.slower_than_now:
        return f"{flags}: not faster here: ~{predicted:.2f} s predicted against {now:.2f} s now ({why})"
    return f"{flags}: ~{predicted:.2f} s predicted ({why})"
