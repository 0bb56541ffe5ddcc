"""Typed errors that the CLI turns into one line and an exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path


class CkptprofError(Exception):
    """Base class: the message is shown to the user as is; ``exit_code`` is returned by ``main``."""

    exit_code = 2


class UsageError(CkptprofError):
    """Bad flags or arguments."""


class CheckpointError(CkptprofError):
    """A checkpoint file or directory that cannot be used; the message names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class SessionFileError(CkptprofError):
    """A saved session that cannot be read."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}")


class RegressionFound(CkptprofError):
    """The run found a problem it was asked to fail on (exit 1)."""

    exit_code = 1
