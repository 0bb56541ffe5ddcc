"""`ckptprof watch`: follow a real SGLang or vLLM server's boot from outside (its rank processes in /proc, the page
cache of its shards, its log) and write what was seen as a session."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ckptprof import interrupts
from ckptprof.cli.outputs import claim_run_dir, release_run_dir
from ckptprof.errors import UsageError
from ckptprof.units import human_bytes
from ckptprof.watch import record as watch_record
from ckptprof.watch.procs import WatchTargetError
from ckptprof.watch.view import Screen
from ckptprof.watch.watcher import DEFAULT_INTERVAL_S, Watcher, attach, start

EPILOG = f"""\
what it shows, per rank process (sglang::scheduler_TP*, VLLM::Worker_TP* / VllmWorker, or vLLM's EngineCore at
TP 1), every --interval: bytes fetched from storage and read calls (/proc/PID/io), major faults, CPU user and
system, RSS, threads and what they are doing (storage / page cache / cpu / waiting, from the kernel's thread
states: no ptrace); per shard of the checkpoints on the server's command line, how much is in the page cache; the
storage bytes of all ranks against the checkpoint's size (read amplification); GPU memory per device through NVML
(pynvml), or "no GPU"; with a log, its phase.

when it ends: the server exits, its log says it is ready, --timeout passes, or Ctrl-C / SIGTERM. A server started
with `--` keeps running after a ready log: its output still passes through, and Ctrl-C stops it.

the session: {watch_record.INTEGRATION}; its fields are in docs/watch.md.

examples:
  ckptprof watch --pid 12345
  ckptprof watch --pid 12345 --log /var/log/sglang.log -o watch-boot1
  ckptprof watch -- python -m sglang.launch_server --model-path /data/model --tp 8
"""


class WatchCommand:
    name = "watch"
    help = (
        "Watch a running SGLang or vLLM server load its checkpoint (--pid), or start one and watch it from the "
        "first instant (-- COMMAND): per-rank storage reads, faults, CPU, memory, shard page-cache residency."
    )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.add_argument(
            "--pid", type=int, default=None, help="the server's launcher process to attach to"
        )
        parser.add_argument(
            "--model-path",
            default=None,
            metavar="DIR",
            help="the checkpoint whose shards to follow (default: the one on the server's command line)",
        )
        parser.add_argument(
            "--log",
            default=None,
            metavar="FILE",
            help="the server's log file, read from its start as it grows",
        )
        parser.add_argument(
            "-o",
            "--output-dir",
            default=None,
            metavar="DIR",
            help="where the session goes (default: a new ckptprof-runs/<timestamp>, as for run)",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=DEFAULT_INTERVAL_S,
            metavar="SECONDS",
            help=f"time between samples (default {DEFAULT_INTERVAL_S:g}: its cost is measured in "
            "benchmarks/bench_watch.py)",
        )
        parser.add_argument(
            "--timeout", type=float, default=None, metavar="SECONDS", help="stop watching after this long"
        )
        parser.add_argument(
            "--py-spy",
            action="store_true",
            help="also read each rank's Python stack every 2 s with py-spy dump --nonblocking (the server is "
            "never paused; needs permission to ptrace it)",
        )
        parser.add_argument(
            "command",
            nargs=argparse.REMAINDER,
            metavar="-- COMMAND",
            help="start this server command and watch it (its output passes through)",
        )

    def run(self, args: argparse.Namespace) -> int:
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if (args.pid is None) == (not command):
            raise UsageError("give either --pid PID or -- COMMAND (the server command to start), not both")
        if args.interval <= 0:
            raise UsageError(f"--interval {args.interval:g}: must be positive")
        created: list[Path] = []
        out_dir = claim_run_dir(args.output_dir, created=created)
        try:
            return self._watch(args, command, out_dir)
        except BaseException:
            release_run_dir(out_dir, created)
            raise

    def _watch(self, args: argparse.Namespace, command: list[str], out_dir: Path) -> int:
        target = attach(args.pid) if args.pid is not None else start(command)
        screen = Screen(sys.stdout)
        watcher = Watcher(
            target,
            model_path=args.model_path,
            log_path=args.log,
            interval_s=args.interval,
            timeout_s=args.timeout,
            screen=screen,
            py_spy=args.py_spy,
        )
        if target.popen is None:
            try:
                watcher.check_is_server()
            except WatchTargetError:
                watcher.residency.close()
                raise
        record = watcher.run()
        stop = interrupts.received() or record.end_reason == "interrupted"
        with interrupts.deferred():
            if stop:
                sig = signal.SIGTERM if interrupts.description() == "SIGTERM" else signal.SIGINT
                watcher.stop_child(sig)
            path = out_dir / "session.json"
            watch_record.write(record, path)
            release_run_dir(out_dir)
        print(summary(record, path))
        if record.end_reason == "ready" and target.popen is not None:
            print("ckptprof watch: the server is ready and keeps running; Ctrl-C stops it", file=sys.stderr)
            try:
                code = watcher.wait_child()
            except KeyboardInterrupt:
                watcher.stop_child(signal.SIGINT)
                return 130
            return 0 if code is None else code
        if stop:
            return 130
        if record.exit_code:
            print(f"ckptprof watch: the server exited with code {record.exit_code}", file=sys.stderr)
            return 1
        return 0


def summary(record: watch_record.WatchRecord, path: Path) -> str:
    ckpt = record.checkpoint_bytes()
    total = record.storage_bytes_total()
    storage = "unknown" if total is None else human_bytes(total)
    amp = f" ({total / ckpt:.2f}x the checkpoint's {human_bytes(ckpt)})" if ckpt and total is not None else ""
    lines = [
        f"ckptprof watch: {record.end_reason} after {record.duration_s:.1f} s; {len(record.ranks)} rank "
        f"process(es), storage reads {storage}{amp}",
        *(f"  - {note}" for note in record.notes),
        f"session: {path} (observed on a live server; ckptprof report {path.parent} renders it)",
    ]
    return "\n".join(lines)
