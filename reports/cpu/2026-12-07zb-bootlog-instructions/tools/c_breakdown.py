"""Where one read's instructions go, by C function and by kind (regex engine, interpreter, ...): the difference of the
two callgrind profiles that instructions.sh keeps (OUT_PREFIX.2 minus OUT_PREFIX.1).

    python c_breakdown.py OUT_PREFIX
"""

from __future__ import annotations

import re
import subprocess
import sys

KINDS = (
    ("regex engine (_sre)", ("sre_",)),
    ("interpreter loop", ("_PyEval_EvalFrameDefault",)),
    ("bytes.translate", ("translate",)),
    ("substring search (in, find, two-way)", ("fastsearch", "two_way", "Contains", "find", "memchr", "memrchr")),
    ("memory copies", ("memcpy", "memmove")),
    ("allocation and freeing", ("alloc", "Free", "free", "dealloc")),
)


def by_function(path: str) -> dict[str, int]:
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True, check=True
    ).stdout
    counts: dict[str, int] = {}
    for line in text.splitlines():
        found = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)", line)
        if found is None or "PROGRAM TOTALS" in line:
            continue
        name = found.group(2).split(" [")[0].rsplit(":", 1)[-1]
        counts[name] = counts.get(name, 0) + int(found.group(1).replace(",", ""))
    return counts


def main() -> None:
    one, two = by_function(sys.argv[1] + ".1"), by_function(sys.argv[1] + ".2")
    read = {name: two.get(name, 0) - one.get(name, 0) for name in set(one) | set(two)}
    total = sum(read.values())
    kinds = dict.fromkeys([kind for kind, _ in KINDS] + ["everything else"], 0)
    for name, count in read.items():
        kind = next((k for k, marks in KINDS if any(mark in name for mark in marks)), "everything else")
        kinds[kind] += count
    print(f"one read: {total:,} instructions")
    for kind, count in kinds.items():
        print(f"{count / total * 100:5.1f}%  {kind}")
    print()
    for name, count in sorted(read.items(), key=lambda item: -item[1])[:25]:
        print(f"{count / total * 100:5.1f}%  {count:>14,}  {name}")


if __name__ == "__main__":
    main()
