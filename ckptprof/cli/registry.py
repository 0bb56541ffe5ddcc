"""The list of subcommands; each lives in its own module."""

from __future__ import annotations

from ckptprof.cli.base import Command


def all_commands() -> list[Command]:
    from ckptprof.cli import inspect_cmd, log_cmd, probe_cmd, run_cmd, synth_cmd

    commands: list[Command] = [
        run_cmd.RunCommand(),
        inspect_cmd.InspectCommand(),
        synth_cmd.SynthCommand(),
        probe_cmd.ProbeCommand(),
        log_cmd.LogCommand(),
    ]
    return commands
