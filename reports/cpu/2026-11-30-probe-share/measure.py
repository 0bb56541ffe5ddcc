"""The README's main job three times with the code at ROOT: the command's wall, the probe's and the load's.

Usage: python reports/cpu/2026-11-30-probe-share/measure.py ROOT LABEL [RUN ARGS...]  (prints Markdown rows)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    root, label, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    env = {**os.environ, "PYTHONPATH": root, "CKPTPROF_PROBE_MAX_AGE_S": "3600"}
    for i in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "o"
            cmd = [sys.executable, "-m", "ckptprof", "run", "--devices", "cpu", "-q", "-o", str(out), *extra]
            started = time.perf_counter()
            subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
            wall = time.perf_counter() - started
            session = json.loads((out / "session.json").read_text())
            stages = session.get("extra", {}).get("stages_s") or {}
            # the code before this change kept only the probe's own clock
            probe = stages.get("probe", session["ceilings"].get("probe_s", 0.0))
            load = session["verdict"]["load_wall_s"]
            print(
                f"| {label} | {i + 1} | {wall:.2f} s | {probe:.2f} s | {100 * probe / wall:.0f}% | {load:.2f} s "
                f"| {100 * load / wall:.0f}% |"
            )


if __name__ == "__main__":
    main()
