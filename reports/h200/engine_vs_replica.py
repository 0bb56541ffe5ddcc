"""Issue 30's table from a campaign's `engine` step: the faithful pass through the real engine's own iterator beside
the replica (--no-engine-iterator) and the decomposed replay, per TP and cache mode.

Usage: python3 reports/h200/engine_vs_replica.py OUTDIR   (reads OUTDIR/engine-tp*-*/session.json)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def load_walls(session: dict[str, Any], key: str, role: str) -> list[float]:
    """Per round, the load's wall: its slowest rank (the ranks start together at a barrier)."""
    per_rank = [m.get(key) or [] for r in session["ranks"] for m in r["models"] if m["role"] == role]
    rounds = min((len(w) for w in per_rank), default=0)
    return [max(w[i] for w in per_rank) for i in range(rounds)]


def row(path: Path) -> list[str]:
    session = json.loads(path.read_text())
    config = session["config"]
    role = session["models"][0]["role"]
    total = sum(m["total_bytes"] for m in session["models"] if m["role"] == role)
    faithful = load_walls(session, "faithful_walls", role)
    decomposed = load_walls(session, "decomposed_walls", role)
    models = [m for r in session["ranks"] for m in r["models"] if m["role"] == role]
    imports = [r.get("engine_import_s") for r in session["ranks"] if r.get("engine_import_s") is not None]
    storage = sum(m.get("faithful_storage_bytes") or 0 for m in models)
    disk = max((m.get("faithful_disk_read_bytes") or 0 for m in models), default=0)
    slowest = max(models, key=lambda m: m.get("faithful_wall_s") or 0.0)
    sampled = slowest.get("faithful_sampled_shares") or {}
    engine = config.get("faithful_engine") or {}
    source = (
        "replica"
        if "replica" in config.get("faithful_source", "")
        else f"{engine.get('package')} {engine.get('version')}"
    )
    if engine.get("stand_ins") and source != "replica":
        source += " (" + ", ".join(engine["stand_ins"]) + " stood in)"
    verdict = session.get("verdict") or {}

    def spread(walls: list[float]) -> str:
        if not walls:
            return "-"
        return f"{statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f})"

    return [
        f"TP{config['tp']}",
        config["cache"],
        source,
        f"{max(imports):.1f}" if imports else "-",
        spread(faithful),
        spread(decomposed),
        f"{storage / total:.4f}" if total else "-",
        f"{disk / total:.4f}" if total else "-",
        f"{sampled.get('storage', 0.0):.0%} / {sampled.get('page_cache', 0.0):.0%} / {sampled.get('cpu', 0.0):.0%}",
        str(verdict.get("bottleneck", "-")),
    ]


HEADER = [
    "config",
    "cache",
    "faithful source",
    "import s (slowest rank)",
    "faithful wall s, median (min-max)",
    "decomposed wall s, median (min-max)",
    "faithful storage / checkpoint (all ranks)",
    "block device / checkpoint",
    "sampled storage / page cache / cpu (slowest rank)",
    "verdict",
]


def main(out: Path) -> int:
    sessions = sorted(out.glob("engine-tp*-*/session.json"))
    if not sessions:
        print(f"{out}: no engine-tp*-*/session.json", file=sys.stderr)
        return 2
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for path in sessions:
        print("| " + " | ".join(row(path)) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
