import json
import sys

root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
import ckptprof  # noqa: E402 - the tree named on the command line

assert ckptprof.__file__.startswith(root)
from ckptprof.bootlog import analyze_path  # noqa: E402

res = {}
for f in ("/tmp/bl34/c16.log", "/tmp/bl34/c4.log"):
    for b in (None, 1, 2, 5, 17, 30, -1, -2, -5):
        try:
            r = analyze_path(f, boot=b)
            res[f"{f}:{b}"] = json.dumps(
                r.to_dict() if hasattr(r, "to_dict") else r.__dict__, default=str, sort_keys=True
            )
        except LookupError as e:
            res[f"{f}:{b}"] = "LookupError " + str(e)
with open(out, "w") as sink:
    json.dump(res, sink)
print(len(res))
