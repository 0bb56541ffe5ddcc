import glob
import json
import sys

root = sys.argv[1]
sys.path.insert(0, root)
import ckptprof  # noqa: E402 - the tree named on the command line

assert ckptprof.__file__.startswith(root), ckptprof.__file__
from ckptprof.bootlog import analyze_bytes  # noqa: E402

out = {}
files = sorted(
    glob.glob("/work/main/tests/fixtures/logs/real/*.log") + glob.glob("/work/main/tests/fixtures/logs/*.log")
)
for f in files:
    with open(f, "rb") as source:
        data = source.read()
    variants = {
        "as-is": data,
        "indent": b"\n".join(b"    " + line for line in data.split(b"\n")),
        "crlf": data.replace(b"\n", b"\r\n"),
    }
    for name, d in variants.items():
        r = analyze_bytes(d)
        out[f"{f}:{name}"] = json.dumps(
            r.to_dict() if hasattr(r, "to_dict") else r.__dict__, default=str, sort_keys=True
        )
with open(sys.argv[2], "w") as sink:
    json.dump(out, sink)
print(len(out))
