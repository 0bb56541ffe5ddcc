"""`ckptprof inspect`: what a checkpoint holds, read from headers only."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tabulate import tabulate

from ckptprof.checkpoint.discovery import ORDERS
from ckptprof.checkpoint.inspection import inspect_checkpoint
from ckptprof.units import human_bytes


class InspectCommand:
    name = "inspect"
    help = "List a checkpoint's shards, dtypes, largest tensors, index consistency, fs type and page-cache residency."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", help="checkpoint directory (or one .safetensors file)")
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        parser.add_argument(
            "--order", choices=ORDERS, default="sorted", help="shard order to list (default: sorted)"
        )
        parser.add_argument(
            "-n", "--largest", type=int, default=10, metavar="N", help="largest tensors to show"
        )
        parser.add_argument(
            "--shards", action="store_true", help="list every shard (default: first and last 5)"
        )

    def run(self, args: argparse.Namespace) -> int:
        result = inspect_checkpoint(args.path, order=args.order)
        data = result.to_dict(largest=args.largest)
        if args.json:
            print(json.dumps(data, indent=1))
        else:
            print(render_text(data, all_shards=args.shards))
        for line in result.errors:
            print(f"ckptprof inspect: error: {line}", file=sys.stderr)
        return 2 if result.errors else 0


def render_text(data: dict[str, Any], all_shards: bool = False) -> str:
    out = [
        f"{data['path']}  ({data['format']}, {data['fs_type']})",
        f"  {len(data['shards'])} shards, {data['tensors']} tensors, {human_bytes(data['total_bytes'])}"
        f" ({data['total_bytes']} bytes); in page cache now: {human_bytes(data['resident_bytes'])}"
        f" ({100 * data['resident_fraction']:.0f}%)",
        "",
    ]
    shards = data["shards"]
    shown = shards if all_shards or len(shards) <= 10 else [*shards[:5], None, *shards[-5:]]
    rows = [
        ["...", "", "", ""]
        if s is None
        else [s["file"], human_bytes(s["bytes"]), s["tensors"], ",".join(s["dtypes"])]
        for s in shown
    ]
    out.append(tabulate(rows, headers=["shard", "size", "tensors", "dtypes"], tablefmt="simple"))
    out.append("")
    rows = [[d, v["tensors"], human_bytes(v["bytes"])] for d, v in data["dtypes"].items()]
    out.append(tabulate(rows, headers=["dtype", "tensors", "bytes"], tablefmt="simple"))
    out.append("")
    rows = [
        [t["name"], t["dtype"], "x".join(map(str, t["shape"])), human_bytes(t["bytes"]), t["file"]]
        for t in data["largest_tensors"]
    ]
    out.append(
        tabulate(rows, headers=["largest tensors", "dtype", "shape", "size", "shard"], tablefmt="simple")
    )
    out.append("")
    index = data["index"]
    if not index["present"]:
        out.append("index: none (every matching file is a shard)")
    elif index["consistent"]:
        out.append(f"index: {index['file']} consistent with the shards")
    else:
        out.append(f"index: {index['file']} INCONSISTENT")
        for key, label in (
            ("shards_missing", "shards named by the index but missing"),
            ("files_not_in_index", "files not in the index (SGLang skips them)"),
            ("tensors_missing", "tensors named by the index but absent from their shard"),
            ("tensors_not_in_index", "tensors in shards but not in the index"),
        ):
            if index[key]:
                names = index[key]
                more = f" (+{len(names) - 5} more)" if len(names) > 5 else ""
                out.append(f"  {label}: {', '.join(names[:5])}{more}")
    return "\n".join(out)
