import sys
import time

from ckptprof.bootlog.phases import analyze_path

p = sys.argv[1]
n = int(sys.argv[2])
analyze_path(p)
ts = []
for _ in range(n):
    t = time.process_time()
    analyze_path(p)
    ts.append(time.process_time() - t)
print(" ".join(f"{x:.4f}" for x in ts))
