"""Which readings differ between two identity.py outputs: python compare.py BASE.json WORK.json"""

import json
import sys
from pathlib import Path

base = json.loads(Path(sys.argv[1]).read_text())
work = json.loads(Path(sys.argv[2]).read_text())
differ = [key for key in base if base[key] != work.get(key)]
print(len(base), "readings,", len(differ), "differ")
for key in differ[:20]:
    print("  ", key)
