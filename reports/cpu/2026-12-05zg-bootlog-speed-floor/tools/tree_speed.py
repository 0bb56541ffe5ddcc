"""analyze_path's speed in one source tree on one file: the best of 4 CPU rounds after a warm-up read.

python tree_speed.py TREE FILE     # run from outside both trees; alternate the trees to share the VM's drift
"""

from __future__ import annotations

import os
import sys
import time

tree, path = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
import ckptprof  # noqa: E402 - the tree named on the command line

assert ckptprof.__file__.startswith(tree), ckptprof.__file__
from ckptprof.bootlog import analyze_path  # noqa: E402

analyze_path(path)
rounds = []
for _ in range(4):
    started = time.process_time()
    analyze_path(path)
    rounds.append(time.process_time() - started)
best = min(rounds)
print(f"{tree}: {os.path.getsize(path) / best / 1e6:.1f} MB/s ({best * 1000:.0f} ms)")
