"""`ckptprof compare BASE NEW`: deltas per model, rank and phase, both verdicts, and a regression gate."""

from __future__ import annotations

import argparse
import json
import math

from ckptprof.analysis.compare import Comparison, compare
from ckptprof.errors import RegressionFound, SessionFileError
from ckptprof.render.markdown import render_comparison
from ckptprof.session import Session

EPILOG = """\
The load wall is the slowest rank's summed model walls (what a server waits for). With --fail-above PCT the
command exits 1 when NEW's load wall is more than PCT percent above BASE's (or NEW has failed ranks), else 0;
2 when a session cannot be read.

examples:
  ckptprof compare runs/before/session.json runs/after/session.json
  ckptprof compare base.json new.json --fail-above 10 --format md >> $GITHUB_STEP_SUMMARY
"""


def _percent(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 10 or 10%)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite percentage: {text!r}")
    return value


def gate(cmp: Comparison, base: Session, new: Session, args: argparse.Namespace) -> None:
    """Raise RegressionFound (exit 1) when NEW fails the --fail-above rule."""
    if not base.ranks or cmp.wall.base is None or cmp.wall.base <= 0:
        raise SessionFileError(args.base, "no rank timings: there is no load wall to compare against")
    failed = [r.rank for r in new.ranks if r.status != "ok"]
    if failed or not new.ranks:
        raise RegressionFound(
            f"{args.new}: rank(s) {failed or 'none'} did not load: NEW is not a complete run"
        )
    if cmp.regressed(args.fail_above):
        raise RegressionFound(
            f"{args.new}: load wall {cmp.wall.new:.3f} s is {cmp.wall.pct:+.1f}% vs BASE {cmp.wall.base:.3f} s "
            f"(allowed: +{args.fail_above:g}%)"
        )


class CompareCommand:
    name = "compare"
    help = "Compare two saved sessions (BASE, NEW): wall deltas per model, rank and phase, and both verdicts."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.add_argument("base", help="BASE session JSON (the reference)")
        parser.add_argument("new", help="NEW session JSON (the candidate)")
        parser.add_argument(
            "--fail-above",
            type=_percent,
            metavar="PCT",
            default=None,
            help="exit 1 when NEW's load wall is more than PCT%% slower than BASE's",
        )
        parser.add_argument(
            "-f", "--format", choices=("table", "md", "json"), default="table", help="output (default table)"
        )

    def run(self, args: argparse.Namespace) -> int:
        base, new = Session.load(args.base), Session.load(args.new)
        cmp = compare(base, new)
        if args.format == "json":
            print(json.dumps({"base": args.base, "new": args.new, **cmp.to_dict()}, indent=1))
        else:
            print(render_comparison(cmp, args.base, args.new, markdown=args.format == "md"), end="")
        if args.fail_above is not None:
            gate(cmp, base, new, args)
        return 0
