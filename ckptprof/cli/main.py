"""Entry point: parse argv, dispatch to a subcommand, turn typed errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ckptprof import interrupts
from ckptprof.cli.base import Command
from ckptprof.cli.parser import CliParser
from ckptprof.errors import CkptprofError
from ckptprof.version import __version__

DESCRIPTION = """\
ckptprof replays SGLang's safetensors loading path per shard and per TP rank, times disk reads,
deserialisation and host-to-device copies separately, measures what the storage and the PCIe links can
do in the same run, and says which limit binds.

examples:
  ckptprof run                               profile a built-in synthetic EAGLE-3 draft checkpoint
  ckptprof run /data/verifier --draft /data/eagle3 --tp 8 --devices cuda --cache cold
  ckptprof inspect /data/eagle3/ckpt         shards, dtypes, index consistency, fs type, page cache
  ckptprof synth /tmp/d --preset eagle3-draft --shards 64 --size 4.7GB
  ckptprof log server.log                    what did the server do at boot, and what is it doing now
"""


def _commands() -> list[Command]:
    # Imported lazily so that `ckptprof log` never pays for importing torch.
    from ckptprof.cli import registry

    return registry.all_commands()


def build_parser() -> CliParser:
    parser = CliParser(
        prog="ckptprof", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-V", "--version", action="version", version=f"ckptprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _commands():
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.prepare_parser(p)
        p.set_defaults(_command=command, _parser=p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            # Refused by the subcommand's parser, which knows its flags (the closest one is suggested).
            getattr(args, "_parser", parser).refuse_unrecognized(extras)
    except SystemExit as exc:  # 2 on usage errors (one line and a hint, ckptprof.cli.parser), 0 on --help
        return int(exc.code) if isinstance(exc.code, int) else 2
    command: Command | None = getattr(args, "_command", None)
    if command is None:
        parser.print_help()
        return 2
    # SIGTERM (a job scheduler, `kill`) takes the same path as Ctrl-C: ranks stopped, partial session saved; a
    # second signal while that happens is ignored (ckptprof.interrupts).
    with interrupts.installed():
        try:
            return command.run(args)
        except CkptprofError as exc:
            print(f"ckptprof {command.name}: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print(f"ckptprof {command.name}: interrupted ({interrupts.description()})", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return 0


def entry() -> None:
    interrupts.install()
    code = main()
    interrupts.ignore_from_now()  # a late Ctrl-C must not turn the exit code into a death by SIGINT
    sys.exit(code)
