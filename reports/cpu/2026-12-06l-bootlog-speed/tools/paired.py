"""Two source trees read one file in turn, round by round, each in a process of its own kept alive between rounds:
a VM whose speed drifts by tens of percent over minutes (the 2-core AMD EPYC VM of 2026-12-06) slows both alike
within a pair. Prints each pair's CPU times and the median of the ratios.

    python paired.py BASE_TREE HEAD_TREE FILE [PAIRS]     # run from outside both trees
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

WORKER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import ckptprof
assert ckptprof.__file__.startswith(sys.argv[1]), ckptprof.__file__
from ckptprof.bootlog import analyze_path
analyze_path(sys.argv[2])  # warm-up
for line in sys.stdin:
    started = time.process_time()
    analyze_path(sys.argv[2])
    print(time.process_time() - started, flush=True)
"""


def main() -> None:
    base, head, path = sys.argv[1:4]
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, tree, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tree in (base, head)
    ]
    times: list[tuple[float, float]] = []
    for index in range(pairs):
        pair = []
        # Which tree goes first alternates: a drift within the pair then favours neither.
        order = (0, 1) if index % 2 == 0 else (1, 0)
        got = {}
        for which in order:
            worker = workers[which]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
            got[which] = float(worker.stdout.readline())
        pair = [got[0], got[1]]
        times.append((pair[0], pair[1]))
        print(
            f"pair {index + 1}: base {pair[0] * 1000:.0f} ms, head {pair[1] * 1000:.0f} ms, head/base {pair[1] / pair[0]:.3f}"
        )
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    size = os.path.getsize(path) / 1e6
    ratios = [h / b for b, h in times]
    print(
        f"median head/base {statistics.median(ratios):.3f}; "
        f"base median {size / statistics.median(b for b, _ in times):.1f} MB/s, best {size / min(b for b, _ in times):.1f}; "
        f"head median {size / statistics.median(h for _, h in times):.1f} MB/s, best {size / min(h for _, h in times):.1f}"
    )


if __name__ == "__main__":
    main()
