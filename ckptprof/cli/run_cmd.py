"""`ckptprof run`: replay SGLang's loading path per rank and say where the time goes."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptprof import interrupts
from ckptprof.cachedir import cache_dir
from ckptprof.checkpoint.discovery import ORDERS
from ckptprof.cli.outputs import DEFAULT_PARENT, check_output_file, claim_run_dir, release_run_dir
from ckptprof.devices import default_device_spec, parse_devices
from ckptprof.errors import CkptprofError, UsageError
from ckptprof.loader import launch
from ckptprof.loader.options import DEFAULT_RANK_TIMEOUT_S
from ckptprof.loader.plan import CACHE_MODES
from ckptprof.results import Ceilings, ServerLog
from ckptprof.session import Session
from ckptprof.stage_hooks import stage_begins
from ckptprof.units import parse_size

if TYPE_CHECKING:
    from ckptprof.probe.reuse import Reused
    from ckptprof.results import StrategyComparison

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


def builtin_checkpoint(size: int, shards: int = 64, quiet: bool = False) -> Path:
    """The built-in demo checkpoint, generated once into the user's cache directory."""
    from ckptprof.checkpoint.synth import synthesize

    path = cache_dir() / f"eagle3-draft-{shards}x{size}"
    marker = path / ".complete"
    if not marker.exists():
        if not quiet:
            print(f"generating the built-in synthetic checkpoint in {path} (once) ...", file=sys.stderr)
        try:
            synthesize(path, preset="eagle3-draft", shards=shards, size=size, force=True)
            marker.write_text("ok\n")
        except OSError as exc:
            raise UsageError(
                f"{path}: cannot write the built-in checkpoint there ({exc.strerror or exc}); "
                "set CKPTPROF_CACHE to a writable folder, or give a checkpoint directory"
            ) from None
    return path


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


# `--strategy peers`: the other loaders, each the way its own documentation recommends, beside ckptprof's pipelined
# reader (InstantTensor twice: its default direct I/O, and the buffered policy that reads through the page cache).
PEERS = (
    "pipelined",
    "safetensors-pread",
    "fastsafetensors",
    "runai-streamer",
    "instanttensor",
    "instanttensor:backend=BUFFERED",
)


def parse_strategies(text: str, verify: bool) -> list[tuple[str, dict[str, object]]]:
    """'sglang,sglang-mt:num_threads=16' -> [(name, params), ...]; with --verify sglang comes first as reference."""
    from ckptprof.loader.strategies import AVAILABLE, parse_spec

    if text.strip() == "all":
        items = list(AVAILABLE)
    elif text.strip() == "peers":
        items = list(PEERS)
    else:
        items = [t for t in text.split(",") if t.strip()]
    specs: list[tuple[str, dict[str, object]]] = []
    for item in items:
        try:
            specs.append(parse_spec(item))
        except (ValueError, TypeError) as exc:
            # The strategy's own checks ("block_mib ... must be at least 1") do not say which item they refused.
            named = str(exc).startswith(("strategy ", "unknown strategy "))
            raise UsageError(f"--strategy{'' if named else f' {item.strip()!r}'}: {exc}") from None
    if not specs:
        raise UsageError("--strategy: name at least one strategy")
    if verify:
        specs = [s for s in specs if s != ("sglang", {})]
        specs.insert(0, ("sglang", {}))
    return specs


# Strategies SGLang can give the draft alone: load formats (--speculative-draft-load-format). The other paths are
# server-wide flags that the draft shares with the target.
DRAFT_FORMATS = ("runai-streamer", "instanttensor", "fastsafetensors")


def parse_draft_strategy(
    text: str | None, draft: str | None, default_spec: str
) -> tuple[str, dict[str, object]] | None:
    """--draft-strategy: a load format, or 'auto' for the release's default path; None when not given."""
    if text is None:
        return None
    if draft is None:
        raise UsageError("--draft-strategy: there is no draft (give it with --draft DIR)")
    from ckptprof.loader.strategies import parse_spec

    spec = default_spec if text.strip() == "auto" else text
    try:
        name, params = parse_spec(spec)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--draft-strategy: {exc}") from None
    if text.strip() != "auto" and name not in DRAFT_FORMATS:
        raise UsageError(
            f"--draft-strategy {name}: SGLang sets only the draft's load format on its own "
            f"(--speculative-draft-load-format): {', '.join(DRAFT_FORMATS)} or auto"
        )
    return name, params


# The bar a server's log shows for a load format -> the strategy that replays it.
LOGGED_FORMATS = {
    "runai_streamer": "runai-streamer",
    "instanttensor": "instanttensor",
    "fastsafetensors": "fastsafetensors",
}


def logged_load_formats(server_log: ServerLog | None, has_draft: bool) -> tuple[str | None, str | None]:
    """(the target's strategy, the draft's --draft-strategy) that the server's log shows, or None for each the
    log does not settle: its load-weights bars name the loader of each model."""
    if server_log is None:
        return None, None
    loaders = server_log.loaders
    target = LOGGED_FORMATS.get(str(loaders.get("target")))
    draft_loader = loaders.get("draft")
    if not has_draft or draft_loader is None or draft_loader == loaders.get("target"):
        return target, None
    # The draft's bar differs from the target's: --speculative-draft-load-format was set on the server.
    return target, LOGGED_FORMATS.get(str(draft_loader), "auto")


def read_server_log(path: str) -> ServerLog:
    """The server's own load-weights phases, read before the replay so a bad path fails fast."""
    from ckptprof.bootlog import LogInputError, analyze_path

    try:
        report = analyze_path(path)
    except LogInputError as exc:
        raise UsageError(f"--log: {exc}") from None
    return ServerLog(
        path=path,
        framework=report.framework,
        state=report.state,
        load_weights=tuple(p for p in report.phases if p.name == "load-weights"),
        loader=report.loader,
        loaders=dict(report.loaders),
    )


def check_recommendations(
    session: Session, replay_one: Callable[..., Session], say: Callable[[str], None]
) -> None:
    """Replay each recommended flag set the verdict has a prediction and a strategy for; record predicted vs
    measured in ``session.extra["prediction_check"]``."""
    from ckptprof import api
    from ckptprof.analysis.predictions import check_predictions
    from ckptprof.loader.strategies import parse_spec

    replays = []
    ceilings_then: list[dict[str, Any]] = []
    paths = api.checkpoint_files(session)  # listed once for every re-measure below
    for prediction in session.verdict.predictions if session.verdict is not None else ():
        spec = prediction.strategy
        if not spec or prediction.predicted_s is None:
            continue
        name, params = parse_spec(spec)
        say(f"checking the prediction for {prediction.flags} ({spec}) ...")
        ceilings_then.append(storage_now(session, fastsafetensors=name == "fastsafetensors", paths=paths))
        replays.append((prediction, replay_one(strategy=name, strategy_params=params)))
    session.extra["prediction_check"] = check_predictions(session, replays, ceilings_then)


def storage_now(session: Session, fastsafetensors: bool, paths: list[Path] | None = None) -> dict[str, Any]:
    """The drifting ceilings measured again just before a checked replay (nothing when the run had no probe, or
    the files cannot be read: the check then holds the first prediction alone). ``paths``: the session's files,
    when the caller has listed them already."""
    from ckptprof import api
    from ckptprof.probe.run_probes import measure_storage_now

    if not session.ceilings.storage_read_n_streams_GBps:
        return {}
    files = paths if paths is not None else api.checkpoint_files(session)
    if files is None:
        return {}
    devices = [str(d) for d in session.config.get("devices") or []]
    try:
        return measure_storage_now(
            files, devices, session.ceilings.storage_streams, fastsafetensors=fastsafetensors
        )
    except OSError:
        return {}


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


def recent_probe(
    target: str | Path, draft: str | None, devices: str, sample: int, args: argparse.Namespace
) -> tuple[dict[str, object] | None, Reused | None]:
    """(the key this run's probe would be stored under, a reusable recent probe or None). No key when the
    checkpoint cannot be listed here: the replay then reports that problem itself."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.probe import reuse

    try:
        max_age = args.probe_max_age if args.probe_max_age is not None else reuse.max_age_from_env()
        files = [f for p in (target, draft) if p for f in discover(Path(p)).files]
        key = reuse.probe_key(files, parse_devices(devices), sample)
    except (CkptprofError, OSError, ValueError):
        return None, None
    if args.reprobe:
        return key, None
    found = reuse.lookup(key, max_age)
    if found is None:
        return key, None
    reused = {"measured_at": found.measured_at, "age_s": round(found.age_s, 1), "max_age_s": max_age}
    return key, dataclasses.replace(found, ceilings={**found.ceilings, "reused": reused})


def choose_release(version: str | None, server_log: ServerLog | None) -> dict[str, object]:
    """The SGLang release profile to replay: --sglang-version, else the installed sglang's metadata (never
    imported), else the bar the server's log shows, else the newest profile."""
    from ckptprof.engines.sglang import choose_profile
    from ckptprof.engines.versions import installed_version

    loader = server_log.loader if server_log is not None else None
    try:
        profile, why, chosen = choose_profile(
            version=version,
            installed=installed_version("sglang") if version is None else None,
            log_loader=loader if isinstance(loader, str) else None,
        )
    except ValueError as exc:
        raise UsageError(f"--sglang-version: {exc}") from None
    return profile.to_dict(why, chosen)


def vllm_strategies(
    release: dict[str, object],
    target: str | Path,
    strategies: list[tuple[str, dict[str, object]]],
    defaulted: bool,
) -> tuple[list[tuple[str, dict[str, object]]], Callable[[list[Session]], str]]:
    """vLLM's automatic-prefetch rule applied to this checkpoint here: the strategies to replay (without
    --strategy: the path vLLM takes here, then the other side of the rule) and the note that says what it does."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.engines import vllm

    profile = vllm.profile_named(str(release.get("profile"))) or vllm.NEWEST
    files = [Path(f) for f in discover(target).files]
    decision = vllm.checkpoint_decision(profile, files)
    release["prefetch_decision"] = decision.to_dict()
    if defaulted:
        reference = [item for item in strategies if item[0] == "sglang"]  # --verify's reference stays first
        strategies = reference + vllm.default_strategies(decision)

    def note(sessions: list[Session]) -> str:
        walls = {
            str(one.config.get("strategy")): one.verdict.load_wall_s
            for one in sessions
            if one.verdict is not None
            and one.verdict.load_wall_s is not None
            and not one.verdict.incomplete
            and not one.config.get("strategy_params")
        }
        cache = str(sessions[0].config.get("cache", "as-is")) if sessions else "as-is"
        return vllm.prefetch_note(profile, decision, walls, cache)

    return strategies, note


def release_order(release: dict[str, object]) -> str:
    """The file order the release loads in: SGLang's sorted or glob order, vLLM's natural or glob order."""
    if release.get("engine") == "vllm":
        return "natural" if release.get("natural_order") else "glob"
    return "sorted" if release.get("sorted_files") else "glob"


def choose_vllm_release(version: str | None, log: str | None) -> dict[str, object]:
    """The vLLM release profile to replay (--vllm-version, else the installed vllm, else the release the server's
    --log names, else the newest)."""
    from ckptprof.engines import vllm

    try:
        return vllm.choose_release(version, log)[1]
    except ValueError as exc:
        raise UsageError(f"--vllm-version: {exc}") from None


def default_strategy_spec(release: dict[str, object]) -> str:
    """'sglang-mt:num_threads=8' for a release whose default is the multithread loader."""
    params = release.get("default_params") or {}
    assert isinstance(params, dict)
    return ":".join([str(release["default_strategy"]), *(f"{key}={value}" for key, value in params.items())])


class RunCommand:
    name = "run"
    help = "Replay SGLang's sharded loading per TP rank; attribute each shard's time to storage, deserialisation, H2D."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
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
            choices=CACHE_MODES,
            default="as-is",
            help="cold: drop the checkpoint's pages first; warm: read it once first; as-is (default): record residency",
        )
        parser.add_argument(
            "--order",
            choices=ORDERS,
            default=None,
            help="shard order: sorted, glob (raw directory order), natural (vLLM); default: the SGLang release's "
            "(sorted from 0.5.13, glob before)",
        )
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
        parser.add_argument(
            "--no-probe", action="store_true", help="skip measuring storage / page-cache / H2D ceilings"
        )
        parser.add_argument(
            "--probe-sample",
            type=_size,
            default=parse_size("2GB"),
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
        parser.add_argument(
            "--synth-size", type=_size, default=parse_size("512MB"), help="size of the built-in checkpoint"
        )
        parser.add_argument("--json", metavar="PATH", help="also write the session JSON here ('-' prints it)")
        parser.add_argument(
            "-o", "--out", metavar="DIR", help="run directory (default ./ckptprof-runs/<timestamp>)"
        )
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
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
            "predicted vs measured wall, and the prediction re-priced with the storage measured just before",
        )
        parser.add_argument(
            "--engine",
            choices=("sglang", "vllm"),
            default=None,
            help="whose loading to replay (default: vllm for a vLLM server's --log or with --vllm-version, else "
            "sglang). vllm: vLLM's paths (strategies vllm, vllm-eager, "
            "vllm-prefetch, vllm-mt; --vllm-version picks the release); without --strategy it replays the path "
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
        parser.add_argument(
            "--html", metavar="PATH", help="also write the self-contained HTML report here (see `report`)"
        )
        parser.add_argument(
            "--trace", metavar="PATH", help="also write a Perfetto / Chrome trace JSON here (ui.perfetto.dev)"
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.tp < 1:
            raise UsageError("--tp must be at least 1")
        if args.faithful_rounds < 1:
            raise UsageError("--faithful-rounds must be at least 1")
        joined = launch.from_environment()
        if args.check_predictions and joined is not None:
            # Only rank 0 holds the verdict whose flags are replayed: the other ranks could not follow.
            raise UsageError("--check-predictions runs with spawned ranks (--tp N), not under torchrun")
        # Checked before anything slow (generating the built-in checkpoint) so a typo fails at once.
        server_log = read_server_log(args.log) if args.log else None
        if args.engine is None:
            # A vLLM server's log (or a vLLM release asked for) means vLLM's loading, unless --engine says otherwise.
            by_log = server_log is not None and server_log.framework == "vllm"
            args.engine = "vllm" if by_log or args.vllm_version else "sglang"
            if by_log and not args.quiet:
                print(
                    "ckptprof run: --log is a vLLM server's: replaying vLLM's loading (--engine vllm)",
                    file=sys.stderr,
                )
        if args.vllm_version and args.engine != "vllm":
            raise UsageError("--vllm-version goes with --engine vllm")
        if args.engine == "vllm":
            if args.sglang_version:
                raise UsageError("--sglang-version goes with --engine sglang")
            release = choose_vllm_release(args.vllm_version, args.log)
            default_spec = "vllm"
        else:
            release = choose_release(args.sglang_version, server_log)
            # A pickle checkpoint (--allow-pickle) has one replayed path, `sglang`'s torch.load; the release's
            # default multithread path reads safetensors only.
            default_spec = "sglang" if args.allow_pickle else default_strategy_spec(release)
        # The server's own load format, when its log shows one (a bar of runai_streamer, instanttensor, ...), is
        # the path to replay unless the user names one.
        logged_target, logged_draft = logged_load_formats(server_log, args.draft is not None)
        if server_log is not None and logged_target and not args.strategy:
            server_log = dataclasses.replace(server_log, strategy_from_log=logged_target)
        if server_log is not None and logged_draft and not args.draft_strategy:
            server_log = dataclasses.replace(server_log, draft_strategy_from_log=logged_draft)
        strategies = parse_strategies(args.strategy or logged_target or default_spec, args.verify)
        draft_spec = parse_draft_strategy(args.draft_strategy or logged_draft, args.draft, default_spec)
        is_rank0 = joined is None or joined.is_main
        # Every place this run writes is checked before the minutes of probing and replay; rank 0 writes them.
        for flag, value in (("--json", args.json), ("--html", args.html), ("--trace", args.trace)):
            check_output_file(flag, value)
        out_dir = claim_run_dir(args.out) if is_rank0 else Path(args.out or DEFAULT_PARENT / "rank-output")
        try:
            return self._run(args, release, server_log, strategies, draft_spec, out_dir, is_rank0)
        finally:
            if is_rank0:
                release_run_dir(out_dir)

    def _run(
        self,
        args: argparse.Namespace,
        release: dict[str, object],
        server_log: ServerLog | None,
        strategies: list[tuple[str, dict[str, object]]],
        draft_spec: tuple[str, dict[str, object]] | None,
        out_dir: Path,
        is_rank0: bool,
    ) -> int:
        from ckptprof import api

        target = args.target or builtin_checkpoint(args.synth_size, quiet=args.quiet)
        devices = args.devices or default_device_spec()
        quiet = args.quiet or not is_rank0

        def say(msg: str) -> None:
            if not quiet:
                print(msg, file=sys.stderr)

        if args.py_spy:
            from ckptprof.profiling.pyspy import check_available

            check_available()
        # A hang (a stuck NFS server, a wedged driver) must end the run, not the user's patience.
        rank_timeout = args.rank_timeout
        if rank_timeout is None:
            rank_timeout = float(os.environ.get("CKPTPROF_RANK_TIMEOUT_S") or DEFAULT_RANK_TIMEOUT_S)
        # What every replay of this run shares: the main strategies and the checked recommendations alike.
        replay_options: dict[str, Any] = {
            "tp": args.tp,
            "devices": devices,
            "cache": args.cache,
            "order": args.order or release_order(release),
            "allow_pickle": args.allow_pickle,
            "faithful": args.faithful,
            "faithful_rounds": args.faithful_rounds,
            "engine_iterator": args.engine_iterator,
            "sample_threads": args.sample_threads,
            "draft_strategy": draft_spec[0] if draft_spec else None,
            "draft_strategy_params": draft_spec[1] if draft_spec else None,
            "expert_parallel": args.ep,
            "rank_timeout_s": rank_timeout,
        }
        vllm_rule = None
        if release.get("engine") == "vllm":
            # Without --strategy (and no load format the server's log shows): both sides of vLLM's prefetch rule.
            defaulted = not args.strategy and not (server_log is not None and server_log.strategy_from_log)
            strategies, vllm_rule = vllm_strategies(release, target, strategies, defaulted)
            say(f"replaying {release['description']} (profile chosen by {release['why']})")
        release_kwargs: dict[str, Any] = {
            "vllm_release" if vllm_rule is not None else "sglang_release": release
        }
        replay_here = functools.partial(
            api.replay,
            target,
            args.draft,
            **release_kwargs,
            progress=not quiet,
            log=say,
            **replay_options,
        )
        probe_key = None
        reused = None
        if not args.no_probe and is_rank0:
            probe_key, reused = recent_probe(target, args.draft, devices, args.probe_sample, args)

        def keep_probe(ceilings: Ceilings) -> None:
            if probe_key is not None:
                from ckptprof.probe import reuse

                reuse.store(probe_key, ceilings.to_dict())

        runs = api.replay_strategies(
            target,
            args.draft,
            strategies,
            ceilings=Ceilings.from_dict(reused.ceilings) if reused is not None else None,
            py_spy_dir=(lambda name: out_dir if len(strategies) == 1 else out_dir / f"py-spy-{name}")
            if args.py_spy
            else None,
            on_ceilings=keep_probe,
            log=say,
            **replay_options,
            verify=args.verify,
            probe=not args.no_probe,
            probe_sample_bytes=args.probe_sample,
            progress=not quiet,
            **release_kwargs,
        )
        sessions, ceilings, interrupted = runs.sessions, runs.ceilings, runs.interrupted
        if vllm_rule is not None and sessions:
            sessions[0].notes.append(vllm_rule(sessions))
        if reused is not None:
            for one in sessions:
                one.notes.insert(
                    0,
                    f"ceilings reused from a probe {reused.describe()} of the same file system(s) and devices "
                    "(--reprobe measures them again)",
                )
        session = sessions[0]
        if args.check_predictions and not interrupted:
            try:
                stage_begins("check")
                check_recommendations(
                    session, functools.partial(replay_here, ceilings=ceilings, probe=False), say
                )
            except (api.InterruptedReplay, KeyboardInterrupt):
                session.notes.append(
                    f"interrupted ({interrupts.description()}) while checking the predictions: not all were checked"
                )
                interrupted = True
        if not is_rank0:
            return 0
        # From here on the work is done: a signal no longer cuts anything short, it only sets the exit code.
        with interrupts.deferred():
            stage_begins("report")
            code = self._report(args, session, sessions, runs.comparison, server_log, out_dir, interrupted)
        if interrupted or interrupts.received():
            return 130
        return code

    def _report(
        self,
        args: argparse.Namespace,
        session: Session,
        sessions: list[Session],
        comparison: StrategyComparison | None,
        server_log: ServerLog | None,
        out_dir: Path,
        interrupted: bool,
    ) -> int:
        """Save the sessions, print the summary, write the asked-for renderings; the exit code for the outcome
        (an interrupted run's outcome is the interruption: its ranks' and strategies' states are not listed)."""
        from ckptprof.render import table

        session.server_log = server_log
        verified_ok = True
        unwritten: list[str] = []
        if comparison is not None:
            from ckptprof.analysis.strategies import strategy_label

            verified_ok = comparison.verified is not False
            for other in sessions[1:]:
                label = strategy_label(other.config)
                # "pipelined:readers=32" -> session-pipelined_readers-32.json: variants of one strategy never collide
                stem = label.replace(":", "_").replace("=", "-").replace("/", "-")
                other_path = out_dir / f"session-{stem}.json"
                if _write(unwritten, other_path, functools.partial(other.save, other_path)):
                    session.artifacts.setdefault("strategy_sessions", {})[label] = str(other_path)
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
            where = session.extra.get("interrupted") or {}
            stage = f" during the {where['stage']}" if isinstance(where, dict) and "stage" in where else ""
            print(
                f"ckptprof run: interrupted ({interrupts.description()}){stage}: the partial session holds what "
                "was measured",
                file=sys.stderr,
            )
            return 130
        from ckptprof.analysis.strategies import session_status

        # A strategy whose package is missing is unavailable, not failed: the others ran and the exit is clean.
        statuses = [session_status(other) for other in sessions]
        failed = any(status == "failed" for status, _ in statuses)
        for other, (status, reason) in zip(sessions, statuses, strict=True):
            if status == "unavailable":
                print(
                    f"ckptprof run: {other.config.get('strategy')} is unavailable here: {reason}",
                    file=sys.stderr,
                )
        for line in failed_shard_lines(session):
            print(f"ckptprof run: error: {line}", file=sys.stderr)
        if not verified_ok:
            print("ckptprof run: --verify: a strategy loaded different values than sglang", file=sys.stderr)
            return 1
        return 2 if failed else 0
