"""Each stage's own time inside one read of /tmp/bl34/c16.log (perf_counter around each call; the timer inflates
calls a little). PYTHONPATH=TREE python stage_times.py"""

import time
from collections import defaultdict

from ckptprof.bootlog.phases import BootLogAnalyzer, iter_blocks

with open("/tmp/bl34/c16.log", "rb") as s:
    blocks = list(iter_blocks(s))
tot = defaultdict(float)
cnt = defaultdict(int)
pc = time.perf_counter


def timed(name, f):
    def w(*a, **k):
        t = pc()
        r = f(*a, **k)
        tot[name] += pc() - t
        cnt[name] += 1
        return r

    return w


import ckptprof.bootlog.phases as P
from ckptprof.bootlog.failures import FailureTracker

P.read_message = timed("read_message", P.read_message)
P.apply_reading = timed("apply_reading", P.apply_reading)
FailureTracker.on_record = timed("failures.on_record", FailureTracker.on_record)
FailureTracker.on_frame = timed("failures.on_frame", FailureTracker.on_frame)
P.parse_record = timed("parse_record(feed_block)", P.parse_record)
P.split_line = timed("split_line", P.split_line)
P.on_bar = timed("on_bar", P.on_bar)
P.unwrap_paste = timed("unwrap_paste", P.unwrap_paste)
P.rare_line_starts = timed("rare", P.rare_line_starts)
P.last_timestamp_before = timed("last_timestamp_before", P.last_timestamp_before)
P.bar_runs = timed("bar_runs", P.bar_runs)
for name in (
    "_on_record",
    "feed_line",
    "_feed_bar_run",
    "_frame_says_nothing",
    "_restart",
    "_on_frame",
    "_advance_to",
    "_timestamp_before",
):
    setattr(BootLogAnalyzer, name, timed(name, getattr(BootLogAnalyzer, name)))
a = BootLogAnalyzer()
t = pc()
for b in blocks:
    a.feed_block(b)
T = pc() - t
print("total", round(T * 1000))
for k, v in sorted(tot.items(), key=lambda x: -x[1]):
    print(f"{k:28s} {v * 1000:7.1f} ms {cnt[k]:7d} calls {v / cnt[k] * 1e6:6.2f} us")
