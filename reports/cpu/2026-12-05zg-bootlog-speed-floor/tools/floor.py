"""What the whole reader costs against a front end that does the least per line it could and still read the same
lines: the passes over the block, the candidate lines' slicing and decoding, parse_record and a dictionary lookup of
the message, with no state machine, no bars, no failures. Each stage is then made free in turn.

    PYTHONPATH=. python reports/cpu/2026-12-05zg-bootlog-speed-floor/tools/floor.py FILE   # e.g. 16 MiB of the corpus

CPU time, the best of 5 rounds, stages alternated round by round so that the VM's drift falls on all alike."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from ckptprof.bootlog import analyze_path
from ckptprof.bootlog.parse import iter_blocks, parse_record
from ckptprof.bootlog.prefilter import CANDIDATE_RE, rare_line_starts
from ckptprof.bootlog.wrappers import unwrap_paste


def front_end(path: str, unwrap: bool = True, rare: bool = True, parse: bool = True) -> int:
    """The candidate lines read as the reader reads them, and nothing done with them but one lookup."""
    seen: dict[object, int] = {}
    lines = 0
    with open(path, "rb") as stream:
        for block in iter_blocks(stream):
            if unwrap:
                block, _ = unwrap_paste(block)
            if rare:
                rare_line_starts(block)
            find, rfind = block.find, block.rfind
            pos = 0
            for match in CANDIDATE_RE.finditer(block):
                at = match.start()
                if at < pos:
                    continue
                start = rfind(b"\n", 0, at) + 1
                end = find(b"\n", at)
                text = block[start:end].decode("utf-8", "replace")
                key: object = text
                if parse:
                    record = parse_record(text)
                    key = (record.style, record.message)
                if key not in seen:
                    seen[key] = lines
                lines += 1
                pos = end + 1
    return lines


def main() -> None:
    path = sys.argv[1]
    size = os.path.getsize(path)
    runs: dict[str, Callable[[], object]] = {
        "the reader (analyze_path)": lambda: analyze_path(path),
        "front end: unwrap + rare needles + candidates + decode + parse_record + lookup": lambda: front_end(
            path
        ),
        "... without parse_record": lambda: front_end(path, parse=False),
        "... and without the rare needles' scans": lambda: front_end(path, rare=False, parse=False),
        "... and without unwrap_paste (candidates, slicing, decoding, lookup)": lambda: front_end(
            path, unwrap=False, rare=False, parse=False
        ),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(5):
        for name, run in runs.items():
            started = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - started)
    for name, seconds in best.items():
        print(f"{seconds * 1000:7.0f} ms  {size / seconds / 1e6:6.1f} MB/s  {name}")
    print(f"lines the front end reads: {front_end(path)}")


if __name__ == "__main__":
    main()
