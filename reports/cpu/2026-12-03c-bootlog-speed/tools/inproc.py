import importlib
import os
import statistics
import sys
import time

sys.path.insert(0, "/tmp/bl34/pk")
p = sys.argv[1]
R = int(sys.argv[2])
names = sys.argv[3:]
mods = {n: importlib.import_module(f"ckptprof_{n}.bootlog.phases") for n in names}
for m in mods.values():
    m.analyze_path(p)
res = {n: [] for n in names}
for r in range(R):
    for n in names if r % 2 == 0 else names[::-1]:
        t = time.process_time()
        mods[n].analyze_path(p)
        res[n].append(time.process_time() - t)
mb = os.path.getsize(p) / 1e6
base = res[names[0]]
for n in names:
    v = res[n]
    rat = [x / b for x, b in zip(v, base, strict=True)]
    print(
        f"{n:8s} min {min(v):.3f}s median {statistics.median(v):.3f}s {mb / statistics.median(v):.1f} MB/s  paired/{names[0]} {statistics.median(rat):.3f} [{min(rat):.2f}..{max(rat):.2f}]"
    )
print(os.getloadavg())
