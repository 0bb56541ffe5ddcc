"""`ckptprof run`: replay SGLang's loading path per rank and say where the time goes."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckptprof import interrupts
from ckptprof.checkpoint.discovery import ORDERS
from ckptprof.cli.outputs import DEFAULT_PARENT, check_output_file, claim_run_dir, release_run_dir
from ckptprof.run.request import DEFAULT_PROBE_SAMPLE_BYTES, DEFAULT_SYNTH_SIZE, RUN_CACHE_MODES
from ckptprof.session import Session
from ckptprof.stage_hooks import CLOCK, stage_begins
from ckptprof.units import parse_size

if TYPE_CHECKING:
    from ckptprof.results import StrategyComparison
    from ckptprof.run import RunConfig, RunRequest

EPILOG = """\
what is measured, per rank and per shard:
  read         bringing tensor bytes into memory (mmap page faults, touched before the copy)
  deserialize  safe_open, get_tensor and the TP narrow bookkeeping (a block that had to wait on
               storage - a major fault, a block read - counts as read)
  h2d          copying resident bytes into the rank's parameters (CUDA events; a host copy on CPU)
With --faithful the verdict also says how long storage held SGLang's own sequence. Under a throughput cap
(cgroup io.max, a cloud volume's credits) reads catch up between copies and that share reads low; the verdict
adds a note when the replay read faster than the storage ceiling it measured.
The session JSON is always saved (default ./ckptprof-runs/<timestamp>/session.json).

examples:
  ckptprof run                                   built-in synthetic EAGLE-3 draft (64 shards, 512 MB)
  ckptprof run /data/eagle3 --cache cold         diagnose a draft checkpoint from a cold page cache
  ckptprof run /data/eagle3 --cache cold,warm    cold, then warm: what storage cost, beside the attribution
  ckptprof run /data/verifier --draft /data/eagle3 --tp 8 --devices cuda --faithful
  torchrun --nproc-per-node 8 -m ckptprof run /data/verifier --devices cuda
  ckptprof run /data/eagle3 --strategy all --verify    every SGLang loading path side by side, values checked
  ckptprof run /data/eagle3 --log server.log --html report.html --py-spy
"""


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def failed_shard_lines(session: Session) -> list[str]:
    """One line per rank that failed, then per shard file that failed (on any rank), naming the file: the rest
    was still measured."""
    lines = [f"rank {r.rank} ({r.device}) failed: {r.error}" for r in session.ranks if r.status == "failed"]
    paths = {m.role: m.path for m in session.models}
    seen: dict[str, str] = {}
    for r in session.ranks:
        for m in r.models:
            for s in m.shards:
                if s.status != "ok":
                    seen.setdefault(f"{paths.get(m.role, '.')}/{s.file}", s.error or "failed")
    return lines + [f"{path}: {error} (the other shards were measured)" for path, error in seen.items()]


def _write(unwritten: list[str], path: Path, write: Callable[[], object]) -> bool:
    """Run ``write``; on an OSError (disk full, permissions changed under the run) note one line and go on."""
    try:
        write()
    except OSError as exc:
        unwritten.append(
            f"{path}: could not be written ({exc.strerror or exc}); the summary above is all there is"
        )
        return False
    return True


def _add_what_and_where(parser: argparse.ArgumentParser) -> None:
    """What is loaded, by how many ranks, on which devices, from which cache state, in which order."""
    parser.add_argument(
        "target",
        nargs="?",
        help="checkpoint directory (the verifier); omit for the built-in synthetic draft",
    )
    parser.add_argument("-d", "--draft", help="the speculative draft checkpoint, loaded after the target")
    parser.add_argument(
        "-t", "--tp", type=int, default=1, help="tensor-parallel ranks, one process each (default 1)"
    )
    parser.add_argument(
        "--devices",
        default=None,
        help="cpu | cuda (all visible) | cuda:0-7 | 0,1 (default: cuda if present, else cpu)",
    )
    parser.add_argument(
        "-c",
        "--cache",
        choices=RUN_CACHE_MODES,
        default="as-is",
        metavar="MODE",
        help="cold: drop the checkpoint's pages first; warm: read it once first; as-is (default): record "
        "residency; cold,warm: the same load cold and then warm, and what storage cost the cold load (cold minus "
        "warm) printed beside the attribution's storage share",
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default=None,
        help="shard order: sorted, glob (raw directory order), natural (vLLM); default: the SGLang release's "
        "(sorted from 0.5.13, glob before)",
    )
    parser.add_argument(
        "--synth-size", type=_size, default=DEFAULT_SYNTH_SIZE, help="size of the built-in checkpoint"
    )


def _add_passes(parser: argparse.ArgumentParser) -> None:
    """The passes besides the decomposed one: the engine's exact sequence, and how it is watched."""
    parser.add_argument(
        "--faithful",
        action="store_true",
        help="also run SGLang's exact sequence and compare walls (SGLang's own iterator when sglang is "
        "importable here, else ckptprof's replica; the summary says which)",
    )
    parser.add_argument(
        "--no-engine-iterator",
        dest="engine_iterator",
        action="store_false",
        help="with --faithful: run ckptprof's replica of the sequence even where the engine is installed here "
        "(to hold the engine's own iterator and the replica against each other)",
    )
    parser.add_argument(
        "--faithful-rounds",
        type=int,
        default=1,
        metavar="N",
        help="with --faithful (implied when N > 1): alternate N faithful passes with decomposed ones and compare "
        "medians - for a host or disk whose speed drifts between passes (default 1)",
    )
    parser.add_argument(
        "--sample-threads",
        action="store_true",
        help="with --faithful (implied): sample every rank's threads from the kernel (~1 kHz: state, wait "
        "channel, faults) while it runs SGLang's sequence unchanged, and give the shares of that wall spent "
        "waiting on storage, faulting cached pages, on the CPU, or waiting on anything else (spawned ranks); "
        "ticks inside SGLang's own copy_ calls (timed in place) count as h2d, running outside them as "
        "deserialisation",
    )
    parser.add_argument(
        "--ep", action="store_true", help="expert parallelism: a rank loads only its own MoE experts"
    )


def _add_probe(parser: argparse.ArgumentParser) -> None:
    """The ceilings: measured, reused, or skipped."""
    parser.add_argument(
        "--no-probe", action="store_true", help="skip measuring storage / page-cache / H2D ceilings"
    )
    parser.add_argument(
        "--probe-sample",
        type=_size,
        default=DEFAULT_PROBE_SAMPLE_BYTES,
        help="bytes each cold storage read of the probe reads; the 1-stream and N-stream reads take disjoint "
        "halves of up to twice this, so a smaller checkpoint is read once (default 2GB)",
    )
    parser.add_argument(
        "--reprobe",
        action="store_true",
        help="measure the ceilings again even when a recent probe of the same file system(s), devices and "
        "sample size could be reused",
    )
    parser.add_argument(
        "--probe-max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="reuse a probe younger than this (default 3600, or $CKPTPROF_PROBE_MAX_AGE_S; 0: never reuse); "
        "the summary prints the reused probe's age",
    )


def _add_paths_and_releases(parser: argparse.ArgumentParser) -> None:
    """Which loading paths and which engine release are replayed, and what is checked."""
    parser.add_argument(
        "-s",
        "--strategy",
        default=None,
        metavar="NAME[,NAME...]",
        help="loading path(s) to replay, compared side by side: sglang, sglang-mt, sglang-mt-completed, "
        "no-mmap, prefetch, pipelined, pipelined-shared (each byte read once per node at TP > 1), "
        "safetensors-pread, and the peers' real loaders fastsafetensors, "
        "runai-streamer, instanttensor (unavailable when not installed), 'peers' (those and pipelined), or "
        "'all'; parameters as NAME:key=value "
        "(e.g. sglang-mt:num_threads=16). Default: the SGLang release's own default path (sglang-mt with 8 "
        "threads from 0.5.10 on, sglang before)",
    )
    parser.add_argument(
        "--draft-strategy",
        metavar="NAME",
        help="the draft's own load format, as SGLang's --speculative-draft-load-format gives it: "
        "runai-streamer, instanttensor, fastsafetensors (parameters as NAME:key=value), or auto (the release's "
        "default path); default: the draft loads like the target, as SGLang does when the flag is not set",
    )
    parser.add_argument(
        "--check-predictions",
        action="store_true",
        help="replay every flag the verdict recommends (same cache mode, same ceilings) and print its "
        "predicted vs measured wall, and the prediction re-priced with the storage measured just before; exit 1, "
        "saying why, when there is nothing to check",
    )
    parser.add_argument(
        "--engine",
        choices=("sglang", "vllm"),
        default=None,
        help="whose loading to replay (default: vllm for a vLLM server's --log or with --vllm-version, else "
        "sglang). vllm: vLLM's paths (strategies vllm, vllm-eager, "
        "vllm-prefetch, vllm-mt, each with :shuffle=true for 0.34's --shuffle-safetensors-files; --vllm-version "
        "picks the release); without --strategy it replays the path "
        "vLLM takes here by its automatic-prefetch rule (this file system, this RAM) and the other side of the "
        "rule, and says what prefetching costs or saves",
    )
    parser.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        help="with --engine vllm: the vLLM release whose loading to replay (default: the installed vllm, else "
        "the release --log names, else the newest profile)",
    )
    parser.add_argument(
        "--sglang-version",
        metavar="X.Y.Z",
        help="the SGLang release whose loading to replay (default: the installed sglang, else the bar in "
        "--log, else the newest profile); the summary says which profile was used and why",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every strategy loaded the same parameter values as sglang (blake2b per parameter and rank)",
    )
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="replay a .bin/.pt (pickle) checkpoint with torch.load(weights_only=True); never unpickled otherwise",
    )
    parser.add_argument(
        "--rank-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a replay pass when no rank has finished a shard for this long, and mark the ranks failed "
        "with where they hung (default 1800, or $CKPTPROF_RANK_TIMEOUT_S; 0: never)",
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="the server's boot log: put its own load-weights times next to the replay's",
    )
    parser.add_argument(
        "--py-spy",
        action="store_true",
        help="sample every rank with py-spy (speedscope files beside the session; needs ptrace)",
    )


def _add_outputs(parser: argparse.ArgumentParser) -> None:
    """What is written and shown besides the summary."""
    parser.add_argument("--json", metavar="PATH", help="also write the session JSON here ('-' prints it)")
    parser.add_argument(
        "-o", "--out", metavar="DIR", help="run directory (default ./ckptprof-runs/<timestamp>)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--html", metavar="PATH", help="also write the self-contained HTML report here (see `report`)"
    )
    parser.add_argument(
        "--trace", metavar="PATH", help="also write a Perfetto / Chrome trace JSON here (ui.perfetto.dev)"
    )


class RunCommand:
    name = "run"
    help = "Replay SGLang's sharded loading per TP rank; attribute each shard's time to storage, deserialisation, H2D."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        _add_what_and_where(parser)
        _add_passes(parser)
        _add_probe(parser)
        _add_paths_and_releases(parser)
        _add_outputs(parser)

    def run(self, args: argparse.Namespace) -> int:
        from ckptprof.run import resolve, warm_rank_server

        CLOCK.restart()  # every stage's time, from here, for the summary (ckptprof.cli.stages)
        # First: the ranks' fork server imports torch on the other core while this process resolves the run (and
        # imports torch itself), rather than after it.
        warm_rank_server()
        # Every choice is made (and a typo refused) before anything slow: the built-in checkpoint, the probe.
        config = resolve(request_from_args(args))
        is_rank0 = config.is_rank0
        if config.from_log and is_rank0:
            # The first line of the run, -q or not: the log, not the defaults, decided what is measured.
            print(log_choice_line(args.log, config.from_log), file=sys.stderr)
        # Every place this run writes is checked before the minutes of probing and replay; rank 0 writes them.
        for flag, value in (("--json", args.json), ("--html", args.html), ("--trace", args.trace)):
            check_output_file(flag, value)
        created: list[Path] = []
        out_dir = (
            claim_run_dir(args.out, created=created)
            if is_rank0
            else Path(args.out or DEFAULT_PARENT / "rank-output")
        )
        try:
            return self._run(args, config, out_dir)
        finally:
            if is_rank0:
                release_run_dir(out_dir, created)

    def _run(self, args: argparse.Namespace, config: RunConfig, out_dir: Path) -> int:
        from ckptprof.run import execute

        quiet = args.quiet or not config.is_rank0

        def say(msg: str) -> None:
            if not quiet:
                print(msg, file=sys.stderr)

        if args.py_spy:
            config = config.with_request(py_spy_dir=out_dir)
        outcome = execute(config, say=say, progress=not args.quiet)
        if not outcome.is_rank0:
            return 0
        # From here on the work is done: a signal no longer cuts anything short, it only sets the exit code.
        with interrupts.deferred():
            stage_begins("report")
            code = self._report(
                args, outcome.session, outcome.sessions, outcome.comparison, out_dir, outcome.interrupted
            )
        if outcome.interrupted or interrupts.received():
            return 130
        if outcome.unchecked is not None:
            # A check was asked for and none could run: a script gating on it must not read success.
            print(
                f"ckptprof run: --check-predictions: nothing was checked: {outcome.unchecked}",
                file=sys.stderr,
            )
            return code or 1
        return code

    def _report(
        self,
        args: argparse.Namespace,
        session: Session,
        sessions: list[Session],
        comparison: StrategyComparison | None,
        out_dir: Path,
        interrupted: bool,
    ) -> int:
        """Save the sessions, print the summary, write the asked-for renderings; the exit code for the outcome
        (an interrupted run's outcome is the interruption: its ranks' and strategies' states are not listed)."""
        from ckptprof.cli.referee import referee_lines
        from ckptprof.cli.stages import stage_times, stages_line
        from ckptprof.render import table

        starts = CLOCK.intervals()
        # Up to the report (this): what the run took before its summary could be written.
        ended = starts.pop()[1] if starts and starts[-1][0] == "report" else CLOCK.now()
        times = stage_times(starts, sessions, ended)
        if times:
            session.extra.run_stages_s = dict(times)
        verified_ok = comparison is None or comparison.verified is not False
        unwritten: list[str] = []
        if comparison is not None:
            _save_strategy_sessions(session, sessions[1:], out_dir, unwritten)
        # Written before the summary is printed, a session survives a terminal that goes away; a write that fails
        # still leaves the summary on the screen and one line why.
        saved = out_dir / "session.json"
        wrote = _write(unwritten, saved, lambda: session.save(saved))
        if args.json == "-":
            print(session.to_json())
        else:
            if args.json:
                _write(unwritten, Path(args.json), lambda: session.save(args.json))
            print(table.render(session))
            for line in referee_lines(session):
                print(line)
            if times:
                print(stages_line(times, probe_reused=session.ceilings.reused is not None))
        if wrote:
            print(f"session saved to {saved}", file=sys.stderr)
        if args.html or args.trace:
            from ckptprof.cli.report_cmd import write_renderings

            _write(
                unwritten,
                Path(args.html or args.trace),
                lambda: write_renderings(session, {"html": args.html, "perfetto": args.trace}),
            )
        for line in unwritten:
            print(f"ckptprof run: error: {line}", file=sys.stderr)
        if unwritten:
            return 2
        if interrupted:
            where = session.extra.interrupted
            stage = f" during the {where.stage}" if where is not None and where.stage is not None else ""
            print(
                f"ckptprof run: interrupted ({interrupts.description()}){stage}: the partial session holds what "
                "was measured",
                file=sys.stderr,
            )
            return 130
        return _outcome_code(session, sessions, verified_ok)


def _save_strategy_sessions(
    session: Session, others: list[Session], out_dir: Path, unwritten: list[str]
) -> None:
    """Every other strategy's session beside the first one's, named in its artifacts."""
    from ckptprof.analysis.strategies import strategy_label

    # A strategy asked for again (--strategy vllm,vllm:shuffle=true,vllm,...: rounds of a comparison) keeps one file
    # per run, numbered from its second: the later would otherwise overwrite the earlier's session.
    times = {strategy_label(session.config): 1}
    for other in others:
        label = strategy_label(other.config)
        times[label] = times.get(label, 0) + 1
        # "pipelined:readers=32" -> session-pipelined_readers-32.json: variants of one strategy never collide
        stem = label.replace(":", "_").replace("=", "-").replace("/", "-")
        if times[label] > 1:
            label, stem = f"{label} ({times[label]})", f"{stem}-{times[label]}"
        other_path = out_dir / f"session-{stem}.json"
        if _write(unwritten, other_path, functools.partial(other.save, other_path)):
            session.artifacts.setdefault("strategy_sessions", {})[label] = str(other_path)


def _outcome_code(session: Session, sessions: list[Session], verified_ok: bool) -> int:
    """The exit code of a run that ended, with a line for each strategy that could not run and each failure."""
    from ckptprof.analysis.strategies import session_status

    # A strategy whose package is missing is unavailable, not failed: the others ran and the exit is clean.
    statuses = [session_status(other) for other in sessions]
    failed = any(status == "failed" for status, _ in statuses)
    for other, (status, reason) in zip(sessions, statuses, strict=True):
        if status == "unavailable":
            print(f"ckptprof run: {other.config.strategy} is unavailable here: {reason}", file=sys.stderr)
    for line in failed_shard_lines(session):
        print(f"ckptprof run: error: {line}", file=sys.stderr)
    if not verified_ok:
        print("ckptprof run: --verify: a strategy loaded different values than sglang", file=sys.stderr)
        return 1
    return 2 if failed else 0


def log_choice_line(log: str, chosen: Sequence[tuple[str, str]]) -> str:
    """``--log`` chose the engine, the release or the path: what, and the flags that choose otherwise."""
    what = "; ".join(item for item, _ in chosen)
    flags = "/".join(dict.fromkeys(flag for _, flag in chosen))
    return f"ckptprof run: --log {log} chose what is replayed: {what} ({flags} to choose otherwise)"


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The run the flags ask for; the policy (``ckptprof.run.policy``) decides the rest."""
    from ckptprof.run import RunRequest

    return RunRequest(
        target=args.target,
        draft=args.draft,
        tp=args.tp,
        devices=args.devices,
        cache=args.cache,
        order=args.order,
        strategy=args.strategy,
        draft_strategy=args.draft_strategy,
        faithful=args.faithful,
        faithful_rounds=args.faithful_rounds,
        engine_iterator=args.engine_iterator,
        sample_threads=args.sample_threads,
        expert_parallel=args.ep,
        probe=not args.no_probe,
        probe_sample_bytes=args.probe_sample,
        reprobe=args.reprobe,
        probe_max_age_s=args.probe_max_age,
        synth_size=args.synth_size,
        engine=args.engine,
        sglang_version=args.sglang_version,
        vllm_version=args.vllm_version,
        verify=args.verify,
        allow_pickle=args.allow_pickle,
        rank_timeout_s=args.rank_timeout,
        server_log=args.log,
        check_predictions=args.check_predictions,
    )
