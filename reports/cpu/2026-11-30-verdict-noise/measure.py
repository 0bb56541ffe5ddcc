"""Identical default `ckptprof run`s on the CPU VM: how far do the phase shares move, and which verdict does each get?

Usage: python reports/cpu/2026-11-30-verdict-noise/measure.py [RUNS [RUN ARGS...]] > table.md
Runs the README's main job (`ckptprof run`, the built-in 512 MB synthetic draft, CPU, as-is cache, no probe so
every run starts from the same warm page cache) RUNS times (default 8) and prints one row per run: the shares of
rank time, the phase with the largest share (what the verdict named before the tie rule) and the verdict now.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

PHASES = ("storage", "page_cache", "deserialize", "h2d", "other")


def one_run(out: Path) -> dict[str, object]:
    cmd = [sys.executable, "-m", "ckptprof", "run", "--devices", "cpu", "--no-probe", "-q", "-o", str(out)]
    cmd += sys.argv[2:]  # e.g. --strategy sglang
    subprocess.run(cmd, check=True, capture_output=True)
    return json.loads((out / "session.json").read_text())["verdict"]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        one_run(Path(tmp) / "warmup")  # generates the built-in checkpoint and warms the page cache
        for i in range(runs):
            verdict = one_run(Path(tmp) / f"run{i}")
            shares = verdict["shares"]
            assert isinstance(shares, dict)
            top = max(PHASES, key=lambda k: shares[k])
            rows.append((i + 1, shares, top, verdict["bottleneck"], verdict.get("close") or []))
    print("| run | " + " | ".join(PHASES) + " | largest share | verdict now |")
    print("|---|" + "---:|" * len(PHASES) + "---|---|")
    for i, shares, top, bottleneck, close in rows:
        cells = " | ".join(f"{100 * shares[k]:.0f}%" for k in PHASES)
        now = f"mixed ({', '.join(close)})" if bottleneck == "mixed" else bottleneck
        print(f"| {i} | {cells} | {top} | {now} |")
    for k in PHASES:
        values = [100 * r[1][k] for r in rows]
        print(
            f"\n{k}: min {min(values):.0f}%, max {max(values):.0f}%, spread {max(values) - min(values):.0f} points",
            end="",
        )
    print()


if __name__ == "__main__":
    main()
