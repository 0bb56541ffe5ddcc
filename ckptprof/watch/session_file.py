"""A saved watch session read back (``ckptprof report`` and ``compare`` take one), and the figures its renderings
share: per-rank rows, the shards' residency, the log's phases and which limit bound the ranks, from the states
their samples were classified into (pure: the session's JSON in, rows and words out; no /proc, no rendering)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptprof.errors import SessionFileError
from ckptprof.session import Session, read_session_json
from ckptprof.units import human_bytes
from ckptprof.watch.record import OBSERVED

# The kernel sampler's classes (profiling.sampler.CLASSES), in the words a reader of the report wants.
STATE_WORDS = {
    "storage": "waiting on storage (state D or major faults)",
    "page_cache": "reading the page cache (minor faults)",
    "cpu": "on the CPU without faults",
    "waiting": "waiting on something else (locks, the GPU, sleeps, the network)",
}
STATE_ORDER = ("storage", "page_cache", "cpu", "waiting")
# A second class this close to the first is named beside it: the samples do not tell them apart.
CLOSE_SHARE = 0.1


def was_full(shard: dict[str, Any]) -> bool:
    """Whether a shard of a watch session was whole in the page cache at some sample, at the start included. Not the
    same as at the end: a kernel that reclaims idle page cache proactively (DAMON's pageout scheme on the
    Firecracker VMs here, seconds after a read, with gigabytes free) takes pages of a loaded shard back before
    watch's last sample."""
    size = shard.get("bytes") or 0
    return bool(size) and max((b for _, b in shard.get("points") or []), default=0) >= size


def session_path(path: str | Path) -> Path:
    """A watch's output folder or its session.json."""
    p = Path(path)
    return p / "session.json" if p.is_dir() else p


def load_session(path: str | Path) -> tuple[dict[str, Any], Session | None]:
    """The session at ``path`` (a file, or the -o folder holding its session.json), read and parsed once: its JSON
    object, and the decoded run ``Session`` - None when it is a watch session (``"observed": "live-server"``).
    Errors are ``Session.load``'s one-liners; a folder without a session.json is named here."""
    given = Path(path)
    p = session_path(given)
    if given.is_dir() and not p.exists():
        raise SessionFileError(
            path, "a folder without a session.json (give a session or a watch's -o folder)"
        )
    data = read_session_json(p)
    if data.get("observed") != OBSERVED:
        return data, Session.from_file_data(p, data)
    if not isinstance(data.get("ranks"), list) or not isinstance(data.get("models"), list):
        raise SessionFileError(p, "a watch session without its ranks or models lists")
    return data, None


def _b(x: Any) -> str:
    return "-" if x is None else human_bytes(int(x))


def _state_counts(doc: dict[str, Any]) -> dict[str, int]:
    """How many samples of all ranks fell in each class (each rank's first sample, which has no interval before
    it, left out as the record's own state_shares does)."""
    columns = list(doc.get("sample_columns") or [])
    if "state" not in columns:
        return {}
    i = columns.index("state")
    counts: dict[str, int] = {}
    for r in doc.get("ranks") or []:
        for row in (r.get("samples") or [])[1:]:
            if isinstance(row, list) and len(row) > i:
                counts[str(row[i])] = counts.get(str(row[i]), 0) + 1
    return counts


@dataclass(frozen=True)
class Bound:
    limit: str | None  # storage | page_cache | cpu | waiting | None (no samples)
    shares: dict[str, float]
    samples: int
    line: str


def bound(doc: dict[str, Any]) -> Bound:
    """Which limit held the ranks back, from the classes of their samples: the class most samples of all ranks
    fell in, with the runner-up named when it is within CLOSE_SHARE."""
    counts = _state_counts(doc)
    total = sum(counts.values())
    if not total:
        return Bound(None, {}, 0, "bound: unknown (no rank was sampled twice)")
    shares = {k: counts.get(k, 0) / total for k in STATE_ORDER if counts.get(k)}
    shares.update({k: v / total for k, v in counts.items() if k not in STATE_ORDER})
    ranked = sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))
    limit, first = ranked[0]
    words = f"{limit.replace('_', '-')}-bound: {100 * first:.0f}% of {total} rank samples {STATE_WORDS.get(limit, limit)}"
    if len(ranked) > 1 and first - ranked[1][1] <= CLOSE_SHARE:
        second = ranked[1][0]
        words += f", {100 * ranked[1][1]:.0f}% {STATE_WORDS.get(second, second)} (too close to tell apart)"
    rest = ", ".join(f"{k.replace('_', ' ')} {100 * v:.0f}%" for k, v in ranked)
    return Bound(limit, shares, total, f"bound: {words} ({rest})")


RANK_HEADERS = [
    "rank",
    "pid",
    "status",
    "storage read",
    "while watched",
    "major faults",
    "CPU s",
    "CPU %",
    "peak RSS",
    "states",
]


def _cpu_s(r: dict[str, Any]) -> float | None:
    w = r.get("while_watched") or {}
    u, s = w.get("user_s"), w.get("system_s")
    return None if u is None or s is None else float(u) + float(s)


def _span_s(r: dict[str, Any], doc: dict[str, Any]) -> float:
    start = float(r.get("first_seen_s") or 0.0)
    end = r.get("gone_s")
    return max(0.0, (float(end) if end is not None else float(doc.get("duration_s") or 0.0)) - start)


def shares_text(shares: dict[str, Any] | None) -> str:
    if not shares:
        return "-"
    return " ".join(
        f"{k.replace('_', ' ')} {100 * float(v):.0f}%"
        for k, v in sorted(shares.items(), key=lambda kv: -kv[1])
    )


STACKS_HEADER = "py-spy stacks"


def _with_stacks(doc: dict[str, Any]) -> bool:
    return any(r.get("stacks") for r in doc.get("ranks") or [])


GPU_HEADER = "GPU peak"


def _with_gpu(doc: dict[str, Any]) -> bool:
    return any(r.get("gpu_peak_bytes") is not None for r in doc.get("ranks") or [])


def rank_headers(doc: dict[str, Any]) -> list[str]:
    """RANK_HEADERS, NVML's peak per rank process where it listed one, and the py-spy stacks' classes where watch
    ran with --py-spy."""
    return (
        RANK_HEADERS
        + ([GPU_HEADER] if _with_gpu(doc) else [])
        + ([STACKS_HEADER] if _with_stacks(doc) else [])
    )


GPU_HEADERS = ["GPU", "name", "total", "used at start", "at end", "peak"]


def gpu_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(d.get("index")),
            str(d.get("name")),
            _b(d.get("total_bytes")),
            _b(d.get("used_at_start")),
            _b(d.get("used_at_end")),
            _b(d.get("peak_used_bytes")),
        ]
        for d in (doc.get("gpus") or {}).get("devices") or []
    ]


def gpu_line(doc: dict[str, Any]) -> str:
    """What the session says of GPU memory in one line: its source, or why there is none ("no GPU")."""
    gpus = doc.get("gpus")
    if gpus is None:
        return "GPU memory: not looked at (a session written before watch sampled it)"
    if gpus.get("devices"):
        return f"GPU memory per device, from {gpus.get('source')} (used bytes of the whole device, every process's)"
    return f"GPU memory: {gpus.get('note') or 'not sampled'}"


def _stacks(n: int) -> str:
    return f"{n} stack" + ("" if n == 1 else "s")


def stacks_cell(stacks: dict[str, Any] | None) -> str:
    """The classified stacks' shares and how many stacks they are, or why there are none."""
    if not stacks:
        return "-"
    if stacks.get("error"):
        return "py-spy could not attach"
    classes = stacks.get("classes") or {}
    n = sum(int(v) for v in classes.values())
    unclassified = int(stacks.get("unclassified") or 0)
    if not n:
        return f"none classified ({_stacks(unclassified)})" if unclassified else "no dump"
    return f"{shares_text(stacks.get('class_shares'))} of {_stacks(n)}" + (
        f" (+{unclassified} unclassified)" if unclassified else ""
    )


def _plus(x: Any, extra: int) -> Any:
    return None if x is None else int(x) + extra


def rank_rows(doc: dict[str, Any]) -> list[list[str]]:
    with_stacks, with_gpu = _with_stacks(doc), _with_gpu(doc)
    rows = []
    for r in doc.get("ranks") or []:
        cpu = _cpu_s(r)
        span = _span_s(r, doc)
        last = r.get("at_last_sight") or {}
        watched = r.get("while_watched") or {}
        # its reads after watch's last look, recovered from its parent at its reap (a note says so)
        recovered = int((r.get("recovered_from_parent") or {}).get("read_bytes") or 0)
        rows.append(
            [
                str(r.get("label")),
                str(r.get("pid")),
                str(r.get("status")) + (f" at {r['gone_s']:.1f} s" if r.get("gone_s") is not None else ""),
                _b(_plus(last.get("read_bytes"), recovered)),
                _b(_plus(watched.get("read_bytes"), recovered)),
                str(last.get("major_faults", "-")),
                "-" if cpu is None else f"{cpu:.2f}",
                "-" if cpu is None or span <= 0 else f"{100 * cpu / span:.0f}%",
                _b(r.get("peak_rss_bytes")),
                shares_text(r.get("state_shares")),
            ]
            + ([_b(r.get("gpu_peak_bytes"))] if with_gpu else [])
            + ([stacks_cell(r.get("stacks"))] if with_stacks else [])
        )
    return rows


SHARD_HEADERS = ["model", "shard", "size", "resident at start", "at end", "first growth s", "full s"]


def shard_rows(doc: dict[str, Any]) -> list[list[str]]:
    def s_(x: Any) -> str:
        return "-" if x is None else f"{float(x):.2f}"

    def pct(part: Any, whole: Any) -> str:
        return "-" if part is None or not whole else f"{100 * part / whole:.0f}%"

    return [
        [
            str(m.get("role")),
            str(s.get("file")),
            _b(s.get("bytes")),
            pct(s.get("resident_at_start"), s.get("bytes")),
            pct(s.get("resident_at_end"), s.get("bytes")),
            s_(s.get("first_growth_s")),
            s_(s.get("full_s")),
        ]
        for m in doc.get("models") or []
        for s in m.get("shards") or []
    ]


PHASE_HEADERS = ["phase", "model", "start", "end", "seconds", "ranks"]


def phase_rows(doc: dict[str, Any]) -> list[list[str]]:
    report = (doc.get("log") or {}).get("report") or {}
    return [
        [
            str(p.get("name")),
            str(p.get("model") or "-"),
            str(p.get("start") or "-"),
            str(p.get("end") or "-"),
            "-" if p.get("seconds") is None else f"{float(p['seconds']):.1f}",
            str(p.get("ranks") or "-"),
        ]
        for p in report.get("phases") or []
    ]


def log_line(doc: dict[str, Any]) -> str:
    log = doc.get("log")
    if not log:
        return "log: none (watch --pid without --log)"
    report = log.get("report") or {}
    return (
        f"log ({log.get('source')}): {report.get('framework', 'unknown')}, state {report.get('state', '-')}, "
        f"{len(report.get('phases') or [])} phase(s)"
    )


def headline(doc: dict[str, Any]) -> str:
    target = doc.get("target") or {}
    totals = doc.get("totals") or {}
    engine = {"sglang": "SGLang", "vllm": "vLLM", "ckptprof": "ckptprof run"}.get(
        str(target.get("engine")), "server"
    )
    amp = totals.get("read_amplification")
    return (
        f"watch of a live {engine} (pid {target.get('pid')}), {doc.get('end_reason')} after "
        f"{float(doc.get('duration_s') or 0.0):.1f} s; {len(doc.get('ranks') or [])} rank process(es) read "
        f"{_b(totals.get('storage_bytes_since_rank_start'))} from storage for a "
        f"{_b(totals.get('checkpoint_bytes'))} checkpoint" + ("" if amp is None else f" ({float(amp):.2f}x)")
    )


def model_lines(doc: dict[str, Any]) -> list[str]:
    out = []
    for m in doc.get("models") or []:
        if m.get("problem") and not m.get("shards"):
            out.append(f"{m.get('role')} {m.get('path')}: {m.get('problem')}")
            continue
        shards = m.get("shards") or []
        full = sum(1 for s in shards if s.get("bytes") and (s.get("resident_at_end") or 0) >= s["bytes"])
        out.append(
            f"{m.get('role')} {m.get('path')} ({m.get('fs_type')}): {len(shards)} shards, "
            f"{_b(m.get('total_bytes'))}; {full} fully in the page cache at the end"
        )
    return out
