"""Read FILE with the reader of TREE, N times, in one process: what callgrind counts (tools/instructions.sh)."""

from __future__ import annotations

import sys

sys.path.insert(0, sys.argv[1])
import ckptprof  # noqa: E402
from ckptprof.bootlog import analyze_path  # noqa: E402

assert ckptprof.__file__.startswith(sys.argv[1]), ckptprof.__file__
for _ in range(int(sys.argv[3])):
    analyze_path(sys.argv[2])
