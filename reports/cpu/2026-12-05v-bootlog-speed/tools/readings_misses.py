"""How many messages read_message reads on /tmp/bl34/c4.log (one copy of the corpus), and how many an LRU cache of a
given size would have spared. PYTHONPATH=TREE python readings_misses.py"""


from ckptprof.bootlog import phases

keys = []
orig = phases.read_message


def rm(m, e):
    keys.append((m, tuple(x.name for x in e)))
    return orig(m, e)


phases.read_message = rm
phases.analyze_path("/tmp/bl34/c4.log")
print("misses", len(keys), "distinct", len(set(keys)))
# simulate LRU of various sizes over the miss stream (approx: misses only)
from collections import OrderedDict

for size in (256, 1024, 4096, 16384):
    lru = OrderedDict()
    hits = 0
    for k in keys:
        if k in lru:
            hits += 1
            lru.move_to_end(k)
        else:
            lru[k] = 1
            if len(lru) > size:
                lru.popitem(last=False)
    print(size, hits)
