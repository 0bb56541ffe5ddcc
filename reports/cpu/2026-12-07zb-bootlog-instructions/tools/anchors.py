"""How many positions the candidate search must try, as the view is built now and as it could be built:
- now: every byte that a regular needle starts with, or an anchored needle is anchored at, reads as NUL in the view,
  and the search tries its alternation at each NUL (prefilter.candidate_view);
- one byte per needle, chosen anywhere in it: the fewest NULs that still give every needle one (a greedy weighted set
  cover, then pruned);
- two bytes per needle: a window of two bytes in each needle, the first bytes read as NUL and the second as \\x01, so
  that the search's literal prefix is two bytes long and the engine's own prefix loop passes most NULs; the first and
  second bytes must be two disjoint sets (a local search, three seeded restarts, counts the pairs the search would
  still try).

    python anchors.py TREE FILE
"""

from __future__ import annotations

import random
import sys
from collections import Counter

sys.path.insert(0, sys.argv[1])
from ckptprof.bootlog import prefilter  # noqa: E402

block = open(sys.argv[2], "rb").read()
counts = Counter(block)
needles = [word.encode() for word in prefilter._WORDS] + [word.encode() for word in prefilter._ANCHORED_AT]
view = prefilter.candidate_view(block)
print(f"{len(block):,} bytes; NULs in the view now: {view.count(0):,}")

uncovered, chosen = set(needles), set()
while uncovered:
    holding = Counter(byte for needle in uncovered for byte in set(needle))
    best = min(holding, key=lambda byte: counts[byte] / holding[byte])
    chosen.add(best)
    uncovered = {needle for needle in uncovered if best not in needle}
for byte in sorted(chosen, key=lambda byte: -counts[byte]):
    if all(set(needle) & (chosen - {byte}) for needle in needles):
        chosen.discard(byte)
print(f"one anchor byte a needle, fewest NULs: {sum(counts[b] for b in chosen):,} ({bytes(sorted(chosen)).decode()})")

pairs = Counter(zip(block, block[1:]))


def cost(windows: dict[bytes, int]) -> int:
    firsts = {needle[at] for needle, at in windows.items()}
    seconds = {needle[at + 1] for needle, at in windows.items()}
    return len(firsts & seconds) * 10**9 + sum(pairs[(a, b)] for a in firsts for b in seconds)


best_score = None
for seed in (1, 2, 3):  # restarts: a local search, so the best of three
    # each needle from its first two bytes, an anchored one from its anchor
    windows = dict.fromkeys(needles, 0) | {w.encode(): at for w, at in prefilter._ANCHORED_AT.items()}
    score = cost(windows)
    rng = random.Random(seed)
    for _ in range(100_000):
        needle = rng.choice(needles)
        before = windows[needle]
        windows[needle] = rng.randrange(len(needle) - 1)
        trial = cost(windows)
        if trial <= score:
            score = trial
        else:
            windows[needle] = before
    best_score = score if best_score is None else min(best_score, score)
clashes, tried = divmod(best_score, 10**9)
print(f"two bytes a needle: {tried:,} pairs tried, with {clashes} byte(s) still both a first and a second")
