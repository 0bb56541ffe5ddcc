"""The tiny interface every subcommand implements."""

from __future__ import annotations

import argparse
from typing import Protocol


class Command(Protocol):
    name: str
    help: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...
