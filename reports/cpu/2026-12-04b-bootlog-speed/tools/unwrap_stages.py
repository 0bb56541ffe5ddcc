"""CPU time of wrappers.py's block passes over the 17 blocks of /tmp/bl34/c16.log (best of 3), and of the pre-filter's
scans: python unwrap_stages.py TREE"""

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from ckptprof.bootlog import prefilter, wrappers
from ckptprof.bootlog.parse import iter_blocks

with Path("/tmp/bl34/c16.log").open("rb") as log:
    BLOCKS = list(iter_blocks(log))


def best_of_3(name: str, stage: Callable[[bytes], object]) -> None:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for block in BLOCKS:
            stage(block)
        best = min(best, time.process_time() - start)
    print(f"{name:22s} {best * 1e3:7.1f} ms")


best_of_3("unwrap_paste", lambda block: wrappers.unwrap_paste(block, None))
best_of_3("unframe", wrappers.unframe)
best_of_3("unlink", wrappers.unlink)
best_of_3("collector prefix sub", lambda block: wrappers._WRAPPER_RE.sub(b"\n", b"\n" + block))
best_of_3("rejoin_wrapped", wrappers.rejoin_wrapped)
best_of_3("rare_line_starts", prefilter.rare_line_starts)
best_of_3("CANDIDATE_RE scan", prefilter.CANDIDATE_RE.findall)
