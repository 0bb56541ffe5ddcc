"""`ckptprof synth`: write a realistic synthetic checkpoint (random data, real tensor names and ratios)."""

from __future__ import annotations

import argparse
import time

from tqdm import tqdm

from ckptprof.checkpoint.synth import DTYPES, PRESETS, plan_tensors, synthesize
from ckptprof.errors import UsageError
from ckptprof.units import human_bytes, parse_size


def size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class SynthCommand:
    name = "synth"
    help = "Write a synthetic safetensors checkpoint shaped like an EAGLE-3 draft, a Kimi-K2 verifier or a Llama."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("out", help="output directory (created; must be empty unless --force)")
        parser.add_argument(
            "-p",
            "--preset",
            choices=PRESETS,
            default="eagle3-draft",
            help="model layout (default eagle3-draft)",
        )
        parser.add_argument("-n", "--shards", type=int, default=64, help="number of shard files (default 64)")
        parser.add_argument(
            "-s",
            "--size",
            type=size_arg,
            default=parse_size("512MB"),
            help="total size, e.g. 512MB, 4.7GB, 1GiB (default 512MB)",
        )
        parser.add_argument(
            "--dtype", choices=sorted(DTYPES), default="bf16", help="weight dtype (default bf16)"
        )
        parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
        parser.add_argument(
            "--layers", type=int, default=None, help="decoder layers (default: from size/shards)"
        )
        parser.add_argument("--experts", type=int, default=None, help="routed experts (kimi-k2.5-verifier)")
        parser.add_argument("--force", action="store_true", help="replace a non-empty output directory")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        if args.shards < 1:
            raise UsageError("--shards must be at least 1")
        specs, _ = plan_tensors(args.preset, args.size, args.shards, args.dtype, args.layers, args.experts)
        total = sum(t.nbytes for t in specs)
        started = time.perf_counter()
        with tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            desc=f"synth {args.preset}",
            disable=args.quiet,
            leave=False,
        ) as bar:
            result = synthesize(
                args.out,
                preset=args.preset,
                shards=args.shards,
                size=args.size,
                dtype=args.dtype,
                seed=args.seed,
                layers=args.layers,
                experts=args.experts,
                force=args.force,
                progress=bar.update,
            )
        elapsed = time.perf_counter() - started
        print(
            f"wrote {result.path}: {len(result.files)} shards, {result.tensors} tensors, "
            f"{human_bytes(result.total_bytes)} in {elapsed:.1f} s ({result.total_bytes / elapsed / 1e6:.0f} MB/s)"
        )
        return 0
