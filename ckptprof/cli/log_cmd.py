"""`ckptprof log`: read an SGLang or vLLM boot log and say what the server did, for how long, and what it is
doing now."""

from __future__ import annotations

import argparse
import json
import os
import sys
from itertools import groupby
from typing import Any

from tabulate import tabulate
from tqdm import tqdm

from ckptprof.bootlog import BootReport, LogInputError, analyze_path, follow_log
from ckptprof.bootlog.phases import STALL_AFTER_S
from ckptprof.bootlog.summary import with_model
from ckptprof.errors import CkptprofError

# A log this large takes seconds to read (13-27 MB/s of boot records on a 2-core VM): show how far it got.
PROGRESS_FROM_BYTES = 64 << 20


def _progress_bar(path: str) -> tqdm[Any]:
    """A byte bar on standard error for a large regular file when standard error is a terminal; a silent one
    otherwise (piped logs have no known size, and scripts reading our stderr want no bar)."""
    try:
        size = os.stat(path).st_size if path != "-" else 0
    except OSError:
        size = 0  # analyze_path says why, with the file's name
    show = size >= PROGRESS_FROM_BYTES and sys.stderr.isatty()
    return tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        desc=f"reading {os.path.basename(path)}",
        disable=not show,
        leave=False,
    )


class LogFileError(CkptprofError):
    """The log cannot be read; the message names the file (exit 2)."""


EPILOG = """\
what it reads:
  SGLang's records (2024 releases to 0.5.x: Init torch distributed or, from 0.5.21, Init parallel begin/ends, Load
  weight begin/end (0.5.23's overlap mode: the weights read in the background while the graphs are captured), KV
  Cache is allocated, Capture cuda graph and its piecewise graphs, the EAGLE draft's second load and its draft graphs)
  and vLLM's (V0 and V1: world_size=N rank=N .. is assigned as, also where the worker's tag is missing,
  Starting to load model, Loading weights took, Loading drafter model, Available KV cache memory,
  GPU KV cache size / # GPU blocks, Graph capturing finished; the V2 runner's Capturing model for speculator, the
  drafter's graphs),
  the loaders' bars (default, Multi-thread, fastsafetensors, Run:ai Model Streamer with its GiB/s), rank tags
  (TP3, DP1 TP3, PP1 TP0 EP0, also a paste's "[TP0] " cut from its time; vLLM's worker prefixes), tracebacks
  (the frames name the phase and the model),
  behind the prefixes that kubectl --timestamps, GitHub Actions, docker compose, journald, TorchServe, a
  container log viewer's export ("2026-05-01 18:45:09.424 | "), Google Cloud Logging's console ("ERROR
  2025-04-05T00:01:19.198923587Z ") and applications re-logging the server through
  Python logging (olmOCR) add, and through the links a notebook
  (Jupyter) makes of a bar's counts.
  A log whose lines run newest first (copied out of a log viewer) is read from its last line, when its stamps
  say so; a log saved as UTF-16 (PowerShell's >) is read as its text, --follow too.
  A file holding several boots (a restart, a retry loop) is reported on its last one; --boot picks another.

speed:
  CPU time: about 27 MB/s of boot records on a 2-core Intel Xeon VM, 13 on a 2-core AMD EPYC one and 18 on a
  GPU host's Xeon (the real corpus of about 500 logs repeated to 64 MiB, 2026-12-06); 115 MB/s of a serving log
  (2026-12-01); compiled, about 22 MB/s of the 400-log corpus (52 of the earlier, plainer 51-log one):
  pip install mypy && CKPTPROF_COMPILE=1 pip install --no-build-isolation .

exit status:
  0 the boot is going on or the server is ready; 1 the boot failed (with --follow also: timed out, or the
  input ended before ready); 2 the file cannot be read or the arguments are wrong.

examples:
  ckptprof log /var/log/sglang/server.log
  kubectl logs --timestamps pod/sglang-0 | ckptprof log -
  ckptprof log server.log --boot 1 --json
  ckptprof log -f server.log --timeout 1800
"""


class BootChoiceError(CkptprofError):
    """--boot names a boot the log does not hold (exit 2)."""


class LogCommand:
    name = "log"
    help = (
        "Read an SGLang or vLLM boot log: phases per rank (init, weights, KV cache, CUDA graphs), shard "
        "progress, stalls and crashes, and what the server is doing now. Exit 1 when the boot failed."
    )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.add_argument("file", help="the server's log file, or - for standard input")
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        parser.add_argument(
            "-f",
            "--follow",
            action="store_true",
            help="keep reading a growing log, with a status line on stderr; exit 0 when the server is ready, "
            "1 when it failed (or on --timeout)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help="with --follow: give up (exit 1) after this long without the server becoming ready",
        )
        parser.add_argument(
            "--boot",
            type=int,
            default=None,
            metavar="N",
            help="when the log holds several boots: report on boot N (1 is the first, -1 the last; default the "
            "last)",
        )
        parser.add_argument(
            "--stall-after",
            type=float,
            default=STALL_AFTER_S,
            metavar="SECONDS",
            help=f"warn when a progress bar has not moved for this long of log time (default {STALL_AFTER_S:.0f})",
        )

    def run(self, args: argparse.Namespace) -> int:
        exit_code = 0
        if args.follow and args.boot is not None:
            raise BootChoiceError("--boot reads a finished log; it cannot be used with --follow")
        try:
            if args.follow:
                outcome = follow_log(args.file, timeout_s=args.timeout, stall_after_s=args.stall_after)
                report, exit_code = outcome.report, outcome.exit_code
                if outcome.reason == "timeout":
                    print(
                        f"ckptprof log: timed out after {args.timeout:g} s: {report.summary}", file=sys.stderr
                    )
                elif outcome.reason == "ended":
                    print("ckptprof log: the log ended before the server was ready", file=sys.stderr)
            else:
                with _progress_bar(args.file) as bar:
                    report = analyze_path(
                        args.file, stall_after_s=args.stall_after, boot=args.boot, on_bytes=bar.update
                    )
                exit_code = 1 if report.state == "failed" else 0
        except LogInputError as exc:
            raise LogFileError(str(exc)) from None
        except LookupError as exc:
            raise BootChoiceError(f"{args.file}: --boot {args.boot}: {exc}") from None
        if args.json:
            print(json.dumps(report.to_dict(), indent=1))
        else:
            print(render_text(report, args.file))
        return exit_code


def render_text(report: BootReport, source: str) -> str:
    name = "standard input" if source == "-" else source
    framework = {"sglang": "SGLang", "vllm": "vLLM"}.get(report.framework, "unrecognised")
    which = f" (boot {report.boot} of {report.boots})" if report.boots > 1 else ""
    served = f" of {report.model_name}" if report.model_name else ""
    lines = [f"{name}: {framework} boot log{served}{which}, {_span_words(report)}", ""]
    if report.phases:
        lines += [_phases_table(report), ""]
    if report.progress:
        lines += ["progress bars (the last frame of each):", _progress_table(report), ""]
    loading = _loader_words(report)
    if loading:
        lines += [loading, ""]
    if report.startup_timings:
        lines += [_startup_timings_words(report.startup_timings)]
        compiled = "torch_compile" in report.startup_timings or "compilation" in report.startup_timings
        if compiled and report.framework == "vllm" and any(p.name == "kv-cache" for p in report.phases):
            lines.append(_COMPILE_IN_KV_CACHE)
        lines.append("")
    # The header names the model: the state's line leaves out the summary's tag that names it again.
    summary = report.summary.removesuffix(with_model("", report.model_name))
    lines.append(f"state: {report.state} - {summary}")
    if report.failure is not None:
        lines.append(_failure_words(report))
    if report.warnings:
        lines += ["", "warnings:", *(f"  - {warning}" for warning in report.warnings)]
    return "\n".join(lines)


def _loader_words(report: BootReport) -> str:
    parts = []
    if report.loader:
        parts.append(f"weights loader: {report.loader}")
    if report.throughput_GiBps is not None:
        parts.append(f"throughput it logged: {report.throughput_GiBps:.2f} GiB/s")
    if report.filesystem:
        parts.append(f"checkpoint file system: {report.filesystem}")
    if report.prefetch:
        parts.append(f"checkpoint prefetch: {report.prefetch}")
    return "; ".join(parts)


# vLLM compiles in its memory profile (gpu_worker.py's determine_available_memory runs the model, which compiles it),
# after the load and before it sizes the KV cache: the reader's kv-cache phase begins at the load's end.
_COMPILE_IN_KV_CACHE = "  (vLLM compiles while it profiles memory: a kv-cache phase that began at the load's end holds the compile's time)"


def _startup_timings_words(timings: dict[str, float]) -> str:
    """The engine's own account of its steps, as it stated them (SGLang's line of every step, vLLM's torch.compile
    and engine-init lines); a group's steps that took no time are left out."""
    words = []
    # A group's steps come together, in the engine's order (``cuda_graph.prefill``, ``cuda_graph.decode``, ...).
    for group, items in groupby(timings.items(), key=lambda item: item[0].partition(".")[0]):
        steps = [(name.partition(".")[2], seconds) for name, seconds in items]
        if steps == [("", steps[0][1])]:
            words.append(f"{group} {steps[0][1]:.2f} s")
            continue
        taken = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in steps if seconds > 0)
        words.append(f"{group} ({taken or 'none captured'})")
    return "startup timings the engine states: " + ", ".join(words)


def _failure_words(report: BootReport) -> str:
    failure = report.failure
    assert failure is not None
    where = " ".join(
        part for part in (failure.phase, f"({failure.model})" if failure.model else None) if part
    )
    step = f", {failure.step}" if failure.step else ""
    return f"failure: {failure.rank or 'the main process'} in {where or 'no boot phase'}{step}"


def _span_words(report: BootReport) -> str:
    if report.first_timestamp is None:
        return "no timestamps"
    return f"{report.first_timestamp} .. {report.last_timestamp}"


def _phases_table(report: BootReport) -> str:
    rows = []
    for phase in report.phases:
        model = " ".join(part for part in (phase.model, phase.variant) if part) or "-"
        end = phase.end or ("running" if phase.name != "ready" else "-")
        rows.append([phase.name, model, phase.start, end, phase.seconds, phase.ranks, phase.slowest_rank])
    headers = ["phase", "model", "start", "end", "seconds", "ranks", "slowest"]
    return tabulate(rows, headers=headers, floatfmt=".2f", missingval="-", disable_numparse=[2, 3])


def _progress_table(report: BootReport) -> str:
    rows = []
    for bar in report.progress:
        rate = "-" if bar.rate is None else f"{bar.rate:.2f}/s"
        elapsed = "-" if bar.elapsed_s is None else f"{bar.elapsed_s} s"
        eta = "-" if bar.eta_s is None or bar.done >= bar.total else f"{bar.eta_s} s"
        rows.append([bar.desc, bar.model or "-", f"{bar.done}/{bar.total}", rate, elapsed, eta])
    return tabulate(rows, headers=["bar", "model", "done", "rate", "elapsed", "eta"], tablefmt="plain")
