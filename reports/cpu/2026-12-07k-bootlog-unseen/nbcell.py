"""A notebook cell's log as batch 66 took it: the text of the cell's stream outputs (stdout and stderr), in the order
they appear in its outputs, joined with nothing between them; other outputs (errors, HTML) are left out.

    git show COMMIT:PATH | python nbcell.py CELL_INDEX | cmp - NAME.log   # CELL_INDEX counts every cell from 0
"""

from __future__ import annotations

import json
import sys
from typing import Any


def cell_log(notebook: Any, index: int) -> str:
    pieces = []
    for output in notebook["cells"][index].get("outputs", []):
        if output.get("output_type") == "stream":
            text = output["text"]
            pieces.append("".join(text) if isinstance(text, list) else text)
    return "".join(pieces)


if __name__ == "__main__":
    sys.stdout.write(cell_log(json.load(sys.stdin), int(sys.argv[1])))
