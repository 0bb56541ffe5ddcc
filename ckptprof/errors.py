"""Typed errors that the CLI turns into one line and an exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path


def os_problem(
    exc: OSError, expected: str = "a regular file", directory_too: bool = False, verb: str = "read"
) -> str:
    """What an OSError from opening, listing or reading a user's path means, in the words every command uses:
    "no such file" ("... or directory" where a directory was expected too), "is a directory, not <expected>",
    "permission denied", else "cannot <verb>: <why>" (a symlink loop, a name too long, EIO)."""
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory" if directory_too else "no such file"
    if isinstance(exc, IsADirectoryError):
        return f"is a directory, not {expected}"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return f"cannot {verb}: {exc.strerror or exc}"


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
