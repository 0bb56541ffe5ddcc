"""_on_record's time by kind of record (style; rule, failure words, traceback frame or nothing) on
/tmp/bl34/c16.log. PYTHONPATH=TREE python record_kinds.py"""

import time
from collections import Counter, defaultdict

from ckptprof.bootlog import phases
from ckptprof.bootlog.phases import BootLogAnalyzer
from ckptprof.bootlog.reading import ENGINE_NAMES, TABLES_FOR_STYLE, read_message

tot = defaultdict(float)
cnt = Counter()
orig = BootLogAnalyzer._on_record
pc = time.perf_counter


def w(self, r):
    key = (r.style if r.style in ENGINE_NAMES else f"plain {self._boot.framework()}", r.message)
    rd = self._readings.get(key)
    if rd is None:
        rd = read_message(r.message, TABLES_FOR_STYLE[key[0]])
    kind = (
        "frame"
        if rd.frame
        else "rule"
        if rd.rule is not None
        else ("fail" if rd.may_fail or r.level in ("ERROR", "CRITICAL") else "none")
    )
    k = (r.style, kind)
    t = pc()
    orig(self, r)
    tot[k] += pc() - t
    cnt[k] += 1


BootLogAnalyzer._on_record = w
phases.analyze_path("/tmp/bl34/c16.log")
T = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:12]:
    print(f"{k!s:30s} {v * 1000:6.1f} ms {cnt[k]:6d} {v / cnt[k] * 1e6:5.1f} us")
print(T)
