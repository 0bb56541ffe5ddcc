"""Speed and correctness of `ckptprof log` on the real-log corpus, for the checkout it is run from.

    python reports/cpu/2026-11-30-bootlog-real-corpus/measure.py [--size BYTES] [--rounds N]

Prints one JSON object: MB/s (CPU and wall, best of N) on a file made of the corpus repeated to SIZE bytes, and
how many corpus logs get their expected framework + state, and framework + state + phases.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ckptprof.bootlog import analyze_path

REAL = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "logs" / "real"


def corpus_file(folder: Path, size: int) -> Path:
    corpus = b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in sorted(REAL.glob("*.log")))
    path = folder / "corpus.log"
    with path.open("wb") as out:
        written = 0
        while written < size:
            written += out.write(corpus[: size - written])
    return path


def accuracy() -> dict[str, int]:
    right_state = right_phases = total = 0
    for log in sorted(REAL.glob("*.log")):
        expect = json.loads(log.with_suffix(".expected.json").read_text())["expect"]
        report = analyze_path(str(log))
        pairs: list[list[str | None]] = []
        for phase in report.phases:
            if [phase.name, phase.model] not in pairs:
                pairs.append([phase.name, phase.model])
        state_ok = (report.framework, report.state) == (expect["framework"], expect["state"])
        right_state += state_ok
        right_phases += state_ok and ("phases" not in expect or pairs == expect["phases"])
        total += 1
    return {"logs": total, "framework_and_state_right": right_state, "and_phases_right": right_phases}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=200_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = corpus_file(Path(folder), args.size)
        cpu, wall = [], []
        for _ in range(args.rounds):
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            report = analyze_path(str(path))
            wall.append(time.perf_counter() - start_wall)
            cpu.append(time.process_time() - start_cpu)
    megabytes = args.size / 1e6
    print(
        json.dumps(
            {
                "MB": megabytes,
                "boots": getattr(report, "boots", None),  # main before this work did not count boots
                "MBps_cpu": round(megabytes / min(cpu), 1),
                "MBps_wall": round(megabytes / min(wall), 1),
                **accuracy(),
            }
        )
    )


if __name__ == "__main__":
    main()
