"""What ``ckptprof watch`` saw of a ``ckptprof run``, held against that run's own session, rank by rank.

Both are read as JSON (a watch session and a run session of the same load); nothing of loader/ or run/ is imported.
The two sides measure different things, and the table says which:

- watch's bytes are ``/proc/PID/io`` ``read_bytes``: what the kernel fetched from storage on the rank's behalf,
  since the rank started. A page is charged to the process that faulted it in first, so ranks that share a
  checkpoint split its bytes between them, and a warm load reads ~0.
- the run's *loaded* bytes are the shard bytes each rank loaded (cache or not); its *storage* bytes are the same
  kernel counter read inside the rank around each shard (its faithful pass's apart, in the faithful pass's own
  processes): agreement shows that sampling from outside lost nothing, not a second measurement of storage.
- watch's load window runs from the last sample before a rank's ``read_bytes`` first grew to the first sample at
  which it reached its final value (so it is quantised by the interval, and empty for a warm load); the run's wall
  is the rank's load wall, measured inside the rank. Residency's window: the shards' last filling (after the
  run's cold drop, when there was one), from the first change seen to the last shard full.

    python -m ckptprof.watch.against_run WATCH_SESSION.json RUN_SESSION.json [-o TABLE.txt] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ckptprof.units import human_bytes
from ckptprof.watch.session_file import was_full

MEASURES = (
    "watch read: bytes the kernel fetched from storage for the rank (/proc/PID/io read_bytes, since it started; a "
    "page is charged to the rank that faulted it in first, a warm load reads ~0)",
    "run loaded: the shard bytes the rank loaded; run storage: the rank's own count of bytes fetched from storage, "
    "read from the same kernel counter inside the rank around each shard (so agreement shows watch lost nothing "
    "between its samples or at the rank's end; the independent check is the sum against the checkpoint's size); "
    "read_bytes_before_load: what the rank process had read before its load began (interpreter, imports, the "
    "engine's import), which watch counts and the run's storage does not",
    "watch window: from the last sample before read_bytes grew to the first at its final value (quantised by the "
    "interval); run wall: the rank's load wall measured inside it (decomposed; faithful beside it when it ran)",
)


def _reading_window(samples: list[list[Any]], columns: list[str]) -> tuple[float, float] | None:
    t_i, b_i = columns.index("t_s"), columns.index("read_bytes")
    points = [(row[t_i], row[b_i]) for row in samples if row[b_i] is not None]
    if len(points) < 2 or points[-1][1] <= points[0][1]:
        return None
    final = points[-1][1]
    start = next(i for i in range(1, len(points)) if points[i][1] > points[i - 1][1]) - 1
    end = next(i for i, (_, b) in enumerate(points) if b >= final)
    return float(points[start][0]), float(points[end][0])


def _window(track: dict[str, Any], columns: list[str]) -> tuple[float, float] | None:
    """The reading window of one rank process; where its last reads were recovered from its parent at its reap
    (watch/reaped.py), it ends at the end of the interval they were recovered in."""
    samples = track.get("samples") or []
    seen = _reading_window(samples, columns)
    rec = track.get("recovered_from_parent") or {}
    if not rec.get("read_bytes") or not rec.get("interval_s") or not samples:
        return seen
    start = seen[0] if seen is not None else float(samples[-1][columns.index("t_s")])
    return start, float(rec["interval_s"][1])


def _last_fill(shard: dict[str, Any]) -> tuple[float, float] | None:
    """(first growth, full) of the shard's last filling: the last sample at which it became full, and the first
    sample after the lowest point between that and the full sample before it (or the start). A cold run drops the
    pages after watch began (a shard resident at the start goes to 0 and fills again), so the first growth and
    first full of the whole watch are not the load. A kernel that reclaims idle page cache (DAMON's pageout on
    the VMs here) may take the pages back after the load: a drop after the last full sample is not a filling."""
    points = shard.get("points") or []
    size = shard.get("bytes") or 0
    if not points or not size:
        return None
    became_full = [i for i in range(1, len(points)) if points[i][1] >= size > points[i - 1][1]]
    if not became_full:
        return None  # full throughout, or never full: no filling that watch saw from its start to its end
    full = became_full[-1]
    before = [i for i in range(full) if points[i][1] >= size]
    start = before[-1] + 1 if before else 0
    low = min(points[i][1] for i in range(start, full))
    last_low = max(i for i in range(start, full) if points[i][1] == low)
    return float(points[last_low + 1][0]), float(points[full][0])


def _run_rank(rank: dict[str, Any]) -> dict[str, Any]:
    models = rank.get("models") or []
    loaded = sum(s.get("bytes") or 0 for m in models for s in m.get("shards") or [])
    storage = sum(s.get("storage_bytes") or 0 for m in models for s in m.get("shards") or [])
    faithful_storage = sum(m.get("faithful_storage_bytes") or 0 for m in models)
    faithful_walls = [m["faithful_wall_s"] for m in models if m.get("faithful_wall_s") is not None]
    return {
        "rank": rank.get("rank"),
        "pid": rank.get("pid"),
        "loaded_bytes": loaded,
        "storage_bytes": storage,
        "faithful_storage_bytes": faithful_storage
        if any("faithful_storage_bytes" in m for m in models)
        else None,
        "wall_s": rank.get("wall_s"),
        "faithful_wall_s": sum(faithful_walls) if faithful_walls else None,
        # what each pass's process had read before its load (imports, the engine's): in watch's count, not the run's
        "read_bytes_before_load": rank.get("read_bytes_before_load"),
        "faithful_read_bytes_before_load": rank.get("faithful_read_bytes_before_load"),
    }


def _seen(tracks: list[dict[str, Any]], columns: list[str], matched_by: str) -> dict[str, Any] | None:
    """What watch saw of one pass of one rank: its process (several, summed, when the pass ran more than once)."""
    if not tracks:
        return None
    seen = [_window(t, columns) for t in tracks] if columns else []
    windows = [w for w in seen if w is not None]
    reads = [(t.get("at_last_sight") or {}).get("read_bytes") for t in tracks]
    # what a rank read after watch's last look, recovered from its parent's counters at its reap (watch/reaped.py)
    recovered = sum((t.get("recovered_from_parent") or {}).get("read_bytes") or 0 for t in tracks)
    return {
        "label": tracks[0].get("label"),
        "pids": [t.get("pid") for t in tracks],
        "matched_by": matched_by,
        "read_bytes": None if any(r is None for r in reads) else sum(r or 0 for r in reads) + recovered,
        "recovered_from_parent_bytes": recovered,
        "major_faults": sum((t.get("at_last_sight") or {}).get("major_faults") or 0 for t in tracks),
        "reading_from_s": min(w[0] for w in windows) if windows else None,
        "reading_to_s": max(w[1] for w in windows) if windows else None,
        "reading_s": round(sum(w[1] - w[0] for w in windows), 3) if windows else None,
        "state_shares": tracks[0].get("state_shares"),
    }


def compare(watch: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """Per rank, watch's figures beside the run's. The run spawns one process per rank for its decomposed pass and,
    with --faithful, new ones for the faithful pass (titled the same): the decomposed one is matched by pid (the
    run saves it), else the first one watch saw with that rank number; the later ones of that rank number are the
    faithful pass's."""
    columns = list(watch.get("sample_columns") or [])
    w_ranks = sorted(watch.get("ranks") or [], key=lambda t: t.get("first_seen_s") or 0.0)
    used: set[Any] = set()
    rows = []
    for rr in run.get("ranks") or []:
        ours = _run_rank(rr)
        same = [t for t in w_ranks if t.get("tp_rank") == ours["rank"]]
        by_pid = [t for t in w_ranks if t.get("pid") == ours["pid"]]
        first = by_pid or same[:1]
        later = [
            t
            for t in same
            if first and (t.get("first_seen_s") or 0.0) > (first[0].get("first_seen_s") or 0.0)
        ]
        if ours["faithful_wall_s"] is None:
            later = []
        used.update(t.get("pid") for t in first + later)
        rows.append(
            {
                "rank": ours["rank"],
                "run": ours,
                "watch": _seen(first, columns, "pid" if by_pid else "rank"),
                "watch_faithful": _seen(later, columns, "rank, after the decomposed pass"),
            }
        )
    shards = [s for m in watch.get("models") or [] for s in m.get("shards") or []]
    full = [s for s in shards if s.get("bytes") and s.get("resident_at_end", 0) >= s["bytes"]]
    whole_once = [s for s in shards if was_full(s)]
    fills = [_last_fill(s) for s in shards]
    firsts = [f[0] for f in fills if f is not None]
    fulls = [f[1] for f in fills if f is not None]
    totals = watch.get("totals") or {}
    run_storage = sum(r["run"]["storage_bytes"] + (r["run"]["faithful_storage_bytes"] or 0) for r in rows)
    return {
        "ranks": rows,
        "unmatched_watch_ranks": [
            f"{r.get('label')} (pid {r.get('pid')})" for r in w_ranks if r.get("pid") not in used
        ],
        "checkpoint_bytes": totals.get("checkpoint_bytes"),
        "watch_read_bytes": totals.get("storage_bytes_since_rank_start"),
        "run_loaded_bytes": sum(r["run"]["loaded_bytes"] for r in rows),
        "run_storage_bytes": run_storage,
        "shards": len(shards),
        "shards_resident_at_end": len(full),
        "shards_full_while_watched": len(whole_once),
        "resident_bytes_start": totals.get("resident_bytes_start"),
        "resident_bytes_end": totals.get("resident_bytes_end"),
        "residency_from_s": min(firsts) if firsts else None,
        "residency_full_s": max(fulls) if fulls and len(fulls) == len(shards) else None,
        "run_cache": (run.get("config") or {}).get("cache"),
        "watch_interval_s": watch.get("interval_s"),
        "measures": list(MEASURES),
    }


def _b(x: int | None) -> str:
    return "-" if x is None else human_bytes(x)


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(c: dict[str, Any]) -> str:
    """The comparison as text: one line per rank, then the totals and what each side measures."""
    head = (
        f"{'rank':>4} {'pass':10} {'watch pid':>9} {'watch read':>11} {'run storage':>11} {'run loaded':>11} "
        f"{'watch window s':>15} {'reading s':>9} {'run wall s':>10}"
    )
    out = [head, "-" * len(head)]
    for row in c["ranks"]:
        r = row["run"]
        passes = [("decomposed", row["watch"], r["storage_bytes"], r["wall_s"])]
        if r["faithful_wall_s"] is not None:
            passes.append(
                ("faithful", row["watch_faithful"], r["faithful_storage_bytes"], r["faithful_wall_s"])
            )
        for name, seen, storage, wall in passes:
            w = seen or {}
            window = (
                "-"
                if w.get("reading_from_s") is None
                else f"{w['reading_from_s']:.1f}-{w['reading_to_s']:.1f}"
            )
            pids = ",".join(str(p) for p in w.get("pids") or []) or "unseen"
            out.append(
                f"{row['rank']:>4} {name:10} {pids:>9} {_b(w.get('read_bytes')):>11} {_b(storage):>11} "
                f"{_b(r['loaded_bytes']):>11} {window:>15} {_s(w.get('reading_s')):>9} {_s(wall):>10}"
            )
    full_s = c["residency_full_s"]
    out += [
        "",
        f"checkpoint {_b(c['checkpoint_bytes'])}; run cache={c['run_cache']}; watch interval {c['watch_interval_s']} s",
        f"all ranks: watch read {_b(c['watch_read_bytes'])} from storage; run storage {_b(c['run_storage_bytes'])}, "
        f"run loaded {_b(c['run_loaded_bytes'])}",
        f"shards whole in page cache while watched: {c.get('shards_full_while_watched', '-')}/{c['shards']}, "
        f"at the end: {c['shards_resident_at_end']}/{c['shards']} "
        f"({_b(c['resident_bytes_start'])} resident when watch began, {_b(c['resident_bytes_end'])} at the end); "
        f"residency grew from {_s(c['residency_from_s'])} s"
        + (
            f" to every shard full at {full_s:.2f} s"
            if full_s is not None
            else " (not every shard became full)"
        ),
    ]
    short = [
        f"rank {row['rank']} {name}: {_b(storage - seen['read_bytes'])}"
        for row in c["ranks"]
        for name, seen, storage in (
            ("decomposed", row["watch"], row["run"]["storage_bytes"]),
            ("faithful", row["watch_faithful"], row["run"]["faithful_storage_bytes"] or 0),
        )
        if seen is not None
        and seen["read_bytes"] is not None
        and storage - seen["read_bytes"] > 0.05 * storage
    ]
    if short:
        out.append(
            "watch saw less than the run counted ("
            + "; ".join(short)
            + "): a rank process that ends reading is "
            "gone before the next sample, and what it read after the last one goes unseen (a shorter --interval "
            "sees more of it)"
        )
    if c["unmatched_watch_ranks"]:
        out.append(
            f"watch saw ranks the run does not list: {', '.join(map(str, c['unmatched_watch_ranks']))}"
        )
    out += ["", "what each side measures:"] + [f"  - {m}" for m in c["measures"]]
    return "\n".join(out) + "\n"


def _shards_of(doc: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    """Per role, the (file, bytes) of its shards, sorted."""
    out: dict[str, list[tuple[str, int]]] = {}
    for m in doc.get("models") or []:
        shards = [(str(s.get("file")), int(s.get("bytes") or 0)) for s in m.get("shards") or []]
        out.setdefault(str(m.get("role")), []).extend(shards)
    return {role: sorted(shards) for role, shards in out.items()}


def checkpoint_mismatch(watch: dict[str, Any], run: dict[str, Any]) -> str | None:
    """Why the two did not load the same checkpoint, or None: a model of the same role whose shards (names and
    sizes) differ, or no model in common. A model only one side has (a run's built-in synthetic draft, which watch
    does not follow; a checkpoint watch could not read) is not a mismatch: ``one_sided`` names it."""
    ours, theirs = _shards_of(watch), _shards_of(run)
    common = [role for role in ours if role in theirs and ours[role]]
    if not common:
        return (
            f"no checkpoint in common (watch followed {', '.join(ours) or 'none'} with shards, the run loaded "
            f"{', '.join(theirs) or 'none'})"
        )
    for role in common:
        w, r = ours[role], theirs[role]
        if w != r:
            wb, rb = sum(b for _, b in w), sum(b for _, b in r)
            return (
                f"the {role} differs: watch followed {len(w)} shards of {human_bytes(wb)}, the run loaded "
                f"{len(r)} of {human_bytes(rb)}"
            )
    return None


def one_sided(watch: dict[str, Any], run: dict[str, Any]) -> list[str]:
    ours, theirs = _shards_of(watch), _shards_of(run)
    return [f"only watch followed the {r}" for r in ours if r not in theirs] + [
        f"only the run loaded the {r} (watch did not follow it)" for r in theirs if r not in ours
    ]


def held_against(watch: dict[str, Any], run: dict[str, Any], fmt: str = "table") -> str:
    """``ckptprof compare``'s rendering of a watch session against a run session: the table (``table``), the
    table in a Markdown code block (``md``) or the comparison's JSON (``json``)."""
    c = compare(watch, run)
    c["one_sided"] = one_sided(watch, run)
    if fmt == "json":
        return json.dumps(c, indent=1) + "\n"
    text = table(c) + "".join(f"note: {n}\n" for n in c["one_sided"])
    if fmt == "md":
        return f"### ckptprof watch against ckptprof run\n\n```\n{text}```\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ckptprof.watch.against_run",
        description="a watch session of a ckptprof run beside that run's own session, per rank",
    )
    parser.add_argument("watch", type=Path, help="the watch session (session.json of ckptprof watch -o DIR)")
    parser.add_argument("run", type=Path, help="the run's session (session.json of ckptprof run -o DIR)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="also write the table here")
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison as JSON here")
    args = parser.parse_args(argv)
    c = compare(json.loads(args.watch.read_text()), json.loads(args.run.read_text()))
    text = table(c)
    sys.stdout.write(text)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps(c, indent=1) + "\n", encoding="utf-8")
    return 0 if all(row["watch"] is not None for row in c["ranks"]) else 1  # a rank watch did not see: 1


if __name__ == "__main__":
    sys.exit(main())
