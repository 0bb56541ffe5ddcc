"""Spawned ranks against forks of the rank server (ckptprof/loader/rank_start.py), alternated in one sitting.

Each round runs `ckptprof run` on the same checkpoint once with CKPTPROF_RANK_START=spawn and once with forkserver,
in alternating order, and reads the session's stage times; prints the medians and every round's figures.

    python reports/cpu/2026-12-07-rank-start/measure.py CHECKPOINT [--rounds 5] [--tp 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHODS = ("spawn", "forkserver")


def one_run(checkpoint: str, tp: int, method: str, extra: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "CKPTPROF_RANK_START": method}
        argv = [sys.executable, "-m", "ckptprof", "run", checkpoint, "--tp", str(tp), "-q", "-o", out, *extra]
        began = time.monotonic()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - began
        stages = json.loads((Path(out) / "session.json").read_text())["extra"]["run_stages_s"]
    return {"process_wall_s": wall, **{f"{k}_s": float(v) for k, v in stages.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tp", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--probe", action="store_true", help="keep the probe (default: --no-probe)")
    args = parser.parse_args()
    extra = [] if args.probe else ["--no-probe"]
    rows = []
    for tp in args.tp:
        got: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
        for i in range(args.rounds):
            order = METHODS if i % 2 == 0 else METHODS[::-1]
            for method in order:
                got[method].append(one_run(args.checkpoint, tp, method, extra))
        for method in METHODS:
            runs = got[method]
            med = {k: statistics.median(r[k] for r in runs) for k in ("process_wall_s", "spawn_s", "load_s")}
            rows.append((tp, method, med, runs))
    print("| tp | ranks start by | process wall s (median) | spawn s (median) | load s (median) | rounds |")
    print("|---|---|---|---|---|---|")
    for tp, method, med, runs in rows:
        print(
            f"| {tp} | {method} | {med['process_wall_s']:.2f} | {med['spawn_s']:.2f} | {med['load_s']:.2f} |"
            f" {len(runs)} |"
        )
    print()
    print(json.dumps([{"tp": tp, "method": m, "runs": runs} for tp, m, _, runs in rows], indent=1))


if __name__ == "__main__":
    main()
