"""The reader against a front end that reads the same kinds of lines and does the least with them, for the reader as
it stands on 2026-12-07 (the candidate search reads a view of the block: prefilter.candidate_view and next_candidate;
a bar's "%" is found by bytes.find). The 2026-12-05 tool (reports/cpu/2026-12-05zg-bootlog-speed-floor) used the
search that came before and no longer runs.

    PYTHONPATH=. python reports/cpu/2026-12-07za-bootlog-speed-floor/tools/floor.py FILE   # e.g. 16 MiB of the corpus

The front end: unwrap_paste, the rare needles' scans, the candidate search (next needle or next "%", whichever
comes first), each candidate line sliced and decoded, parse_record, and one dictionary lookup of the message. No clock,
no state machine, no bars, no failures, no until-ready lines, no traceback-frame skipping: a floor, not the reader.
Each stage is then made free in turn. CPU time, the best of 5 rounds, stages alternated round by round."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from ckptprof.bootlog import analyze_path
from ckptprof.bootlog.parse import iter_blocks, parse_record
from ckptprof.bootlog.prefilter import candidate_view, next_candidate, rare_line_starts
from ckptprof.bootlog.wrappers import unwrap_paste


def front_end(path: str, unwrap: bool = True, rare: bool = True, parse: bool = True) -> int:
    seen: dict[object, int] = {}
    lines = 0
    with open(path, "rb") as stream:
        for block in iter_blocks(stream):
            if unwrap:
                block, _ = unwrap_paste(block)
            starts = rare_line_starts(block) if rare else []
            view = candidate_view(block)
            find, rfind = block.find, block.rfind
            size = len(block)
            pos = 0
            needle: tuple[int, int] | None = None
            exhausted = False
            percent = -1
            while pos < size:
                # Each search is reused while what it found lies ahead, as the reader's loop does.
                if (needle is None and not exhausted) or (needle is not None and needle[0] < pos):
                    needle = next_candidate(view, block, pos)
                    exhausted = needle is None
                if percent < pos:
                    percent = find(b"%", pos)
                    if percent < 0:
                        percent = size
                at = min(needle[0] if needle else size, percent)
                while starts and starts[-1] < pos:
                    starts.pop()
                if starts and starts[-1] < at:
                    at = starts.pop()
                if at >= size:
                    break
                start = max(pos, rfind(b"\n", 0, at) + 1)
                end = find(b"\n", at)
                end = size if end < 0 else end
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
        "front end: unwrap + rare needles + candidates + decode + parse_record + lookup": lambda: front_end(path),
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
