"""How fast a tree reads 10 MB of a TP8 SGLang server's decode statistics after its ready line (best of 3, CPU).

    python reports/cpu/2026-12-06r-bootlog-unseen/tools/decode_lines.py TREE   # a folder holding ckptprof/
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from ckptprof.bootlog import analyze_bytes  # noqa: E402 - the tree named on the command line

REPO = Path(__file__).resolve().parents[4]
head = (REPO / "tests/fixtures/logs/sglang_tp8_ready.log").read_bytes()
rng = random.Random(1)
lines = b"".join(
    b"[2025-11-29 10:02:%02d TP%d] Decode batch. #running-req: %d, #token: %d, token usage: 0.12, "
    b"gen throughput (token/s): %d.%d\n"
    % (i % 60, i % 8, rng.randrange(64), rng.randrange(10**6), rng.randrange(3000), rng.randrange(100))
    for i in range(80_000)
)
data = head + lines
best = float("inf")
for _ in range(3):
    start = time.process_time()
    analyze_bytes(data)
    best = min(best, time.process_time() - start)
print(f"{sys.argv[1]}: {len(data) / 1e6:.1f} MB in {best:.3f} s, {len(data) / best / 1e6:.1f} MB/s")
