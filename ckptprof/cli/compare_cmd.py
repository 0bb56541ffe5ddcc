"""`ckptprof compare BASE NEW`: deltas per model, rank and phase, both verdicts, and a regression gate."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ckptprof.analysis.compare import Comparison, compare, incomplete
from ckptprof.errors import RegressionFound, SessionFileError, UsageError
from ckptprof.render.markdown import render_comparison
from ckptprof.session import Session, dumps_strict

EPILOG = """\
The load wall is the slowest rank's summed model walls (what a server waits for). With --fail-above PCT the
command exits 1 when NEW's load wall is more than PCT percent above BASE's (or NEW has failed ranks), else 0;
2 when a session cannot be read or the gate cannot rule: BASE is not a complete run (failed ranks or shards,
no timings), NEW has no timings, the two sessions loaded different checkpoints (model paths, shards or total
bytes) or were run with settings that move the wall (tp, devices, cache, strategy and its parameters; the
error names each with both values) - unless --allow-different-config accepts that - or a load-wall figure is
not a finite number. Without --fail-above such differences are shown with a warning line.

A `ckptprof watch` session (or its -o folder) beside a `ckptprof run` session of the same checkpoint, in either
order, is held against it per rank and pass (python -m ckptprof.watch.against_run's table: bytes watch saw read
from storage against the run's own count, reading windows against the run's walls); two watch sessions, different
checkpoints (a model of the same role with other shards) and --fail-above are refused (exit 2).

examples:
  ckptprof compare runs/before/session.json runs/after/session.json
  ckptprof compare base.json new.json --fail-above 10 --format md >> $GITHUB_STEP_SUMMARY
  ckptprof compare tp8.json tp4.json --fail-above 10 --allow-different-config
  ckptprof compare watch-boot1 runs/tp8/session.json
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
    """Raise RegressionFound (exit 1) when NEW fails the --fail-above rule; a CkptprofError with exit 2 when
    the gate cannot rule (it fails closed: nothing it cannot vouch for passes)."""
    if not base.ranks or cmp.wall.base is None or cmp.wall.base <= 0:
        raise SessionFileError(args.base, "no rank timings: there is no load wall to compare against")
    base_problem = incomplete(base)
    if base_problem:
        raise SessionFileError(args.base, f"{base_problem}: BASE is not a complete run to compare against")
    # Unlike runs fail closed too: a TP 4 run is not a regression of a TP 8 one. Accepting the difference is the
    # user's call (the same model moved to a new path, a deliberate change of strategy), never the default.
    allowed = getattr(args, "allow_different_config", False)  # API callers' Namespaces may lack the flag
    if cmp.checkpoint_diff and not allowed:
        raise UsageError(
            f"{args.base} and {args.new} loaded different checkpoints ({cmp.checkpoint_diff}): "
            "their load walls cannot be compared (--allow-different-config gates them anyway)"
        )
    new_problem = incomplete(new)  # a NEW that is "faster" because a rank died is a regression (exit 1)
    if new_problem:
        raise RegressionFound(f"{args.new}: {new_problem}: NEW is not a complete run")
    if cmp.wall.new is None or cmp.wall.new <= 0:
        raise SessionFileError(args.new, "no rank timings: NEW has no load wall to compare")
    # After NEW's own problems: a failed or untimed NEW says more than its settings do.
    if cmp.unlike and not allowed:
        raise UsageError(
            f"{args.base} and {args.new} were run with different settings ({cmp.unlike_words()}): their load "
            "walls are not like for like; pass --allow-different-config to gate them anyway"
        )
    nonfinite = cmp.nonfinite()
    if nonfinite:
        raise UsageError(f"{args.base} vs {args.new}: {nonfinite}: not a finite figure, the gate cannot rule")
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
        parser.add_argument(
            "base", help="BASE session JSON (the reference); or a `ckptprof watch` session (its folder too)"
        )
        parser.add_argument(
            "new", help="NEW session JSON (the candidate); or a `ckptprof watch` session (its folder too)"
        )
        parser.add_argument(
            "--fail-above",
            type=_percent,
            metavar="PCT",
            default=None,
            help="exit 1 when NEW's load wall is more than PCT%% slower than BASE's",
        )
        parser.add_argument(
            "--allow-different-config",
            action="store_true",
            help="let --fail-above rule on sessions of different checkpoints or wall-moving settings (tp, "
            "devices, cache, strategy and its parameters), which it otherwise refuses with exit 2",
        )
        parser.add_argument(
            "-f", "--format", choices=("table", "md", "json"), default="table", help="output (default table)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from ckptprof.watch.session_file import load_session

        (base_data, base), (new_data, new) = load_session(args.base), load_session(args.new)
        if base is None or new is None:
            return _compare_watch(args, (base_data, base), (new_data, new))
        cmp = compare(base, new)
        if args.format == "json":
            print(dumps_strict({"base": args.base, "new": args.new, **cmp.to_dict()}, indent=1))
        else:
            print(render_comparison(cmp, args.base, args.new, markdown=args.format == "md"), end="")
        if args.fail_above is None or args.allow_different_config:
            # Shown, not refused: say on stderr (the output may be JSON or a step summary) what makes them unlike.
            if cmp.checkpoint_diff:
                print(
                    f"ckptprof compare: warning: different checkpoints ({cmp.checkpoint_diff})",
                    file=sys.stderr,
                )
            if cmp.unlike:
                print(
                    f"ckptprof compare: warning: different settings ({cmp.unlike_words()}): the load walls are "
                    "not like for like",
                    file=sys.stderr,
                )
        if args.fail_above is not None:
            gate(cmp, base, new, args)
        return 0


def _compare_watch(
    args: argparse.Namespace,
    base: tuple[dict[str, Any], Session | None],
    new: tuple[dict[str, Any], Session | None],
) -> int:
    """A watch session held against a run session of the same checkpoint (either order), by
    ckptprof.watch.against_run; two watch sessions, mismatched checkpoints or a gate are refused in one line.
    Each side comes as ``load_session`` read it: its JSON, and the run's decoded session (None for a watch)."""
    from ckptprof.watch.against_run import checkpoint_mismatch, held_against

    if base[1] is None and new[1] is None:
        raise UsageError(
            f"{args.base} and {args.new} are both watch sessions: compare holds a watch session against a "
            "`ckptprof run` session of the same checkpoint"
        )
    (watch, _), (run, _) = (base, new) if base[1] is None else (new, base)
    watch_path, run_path = (args.base, args.new) if base[1] is None else (args.new, args.base)
    if args.fail_above is not None:
        raise UsageError(
            "--fail-above gates two `ckptprof run` sessions: a watch session has no load wall to gate"
        )
    mismatch = checkpoint_mismatch(watch, run)
    if mismatch is not None:
        raise UsageError(f"{watch_path} and {run_path} watched and ran different checkpoints: {mismatch}")
    sys.stdout.write(held_against(watch, run, args.format))
    return 0
