"""The list of subcommands; each lives in its own module."""

from __future__ import annotations

from ckptprof.cli.base import Command


def all_commands() -> list[Command]:
    from ckptprof.cli import (
        compare_cmd,
        inspect_cmd,
        log_cmd,
        probe_cmd,
        report_cmd,
        run_cmd,
        synth_cmd,
        watch_cmd,
    )

    commands: list[Command] = [
        run_cmd.RunCommand(),
        inspect_cmd.InspectCommand(),
        synth_cmd.SynthCommand(),
        probe_cmd.ProbeCommand(),
        log_cmd.LogCommand(),
        report_cmd.ReportCommand(),
        compare_cmd.CompareCommand(),
        watch_cmd.WatchCommand(),
    ]
    return commands
