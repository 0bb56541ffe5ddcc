"""Where `ckptprof run` writes, checked before any work: a run that probes and replays for minutes must not
then fail on a folder it cannot write, and two runs must never write over one another's session."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from pathlib import Path

from ckptprof.errors import UsageError

LOCK_NAME = ".ckptprof-run.lock"
DEFAULT_PARENT = Path("ckptprof-runs")


def _problem(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _made(path: Path) -> list[Path]:
    """The folders ``path.mkdir(parents=True)`` would create, deepest first."""
    return [p for p in (path, *path.parents) if not p.exists()]


def claim_run_dir(
    requested: str | None, now: dt.datetime | None = None, created: list[Path] | None = None
) -> Path:
    """The run directory, created and claimed (an exclusive lock file) before the run starts.

    ``-o DIR`` that already holds a session is refused, never overwritten; without ``-o`` a fresh
    ``ckptprof-runs/<timestamp>`` is made, with a suffix when another run took that second. The folders this made
    are appended to ``created`` (deepest first), for ``release_run_dir`` to remove if the run wrote nothing.
    """
    made = created if created is not None else []
    if requested is not None:
        path = Path(requested)
        if path.exists() and not path.is_dir():
            raise UsageError(f"-o {path}: exists and is not a directory")
        try:
            made.extend(_made(path))
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"-o {path}: cannot create the run directory ({_problem(exc)})") from None
        if (path / "session.json").exists():
            raise UsageError(
                f"-o {path}: already holds a session ({path / 'session.json'}); "
                "give another directory or move that one away (sessions are never overwritten)"
            )
        _lock(path, "-o")
        return path
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    try:
        parents = _made(DEFAULT_PARENT)
        DEFAULT_PARENT.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{DEFAULT_PARENT.resolve()}: cannot create the runs directory ({_problem(exc)}); use -o DIR"
        ) from None
    for attempt in range(1, 1000):
        path = DEFAULT_PARENT / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir()  # exclusive: a run started in the same second gets the next suffix
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(
                f"{path.resolve()}: cannot create the run directory ({_problem(exc)}); use -o DIR"
            ) from None
        made.extend([path, *parents])
        _lock(path, "run directory")
        return path
    raise UsageError(f"{DEFAULT_PARENT.resolve()}: no free run directory for {stamp}; use -o DIR")


def _lock(path: Path, what: str) -> None:
    try:
        fd = os.open(path / LOCK_NAME, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise UsageError(
            f"{what} {path}: another ckptprof run is writing there ({path / LOCK_NAME}); "
            "give another directory (remove the lock file only if no run is going on)"
        ) from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write there ({_problem(exc)})") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{os.getpid()}\n")


def release_run_dir(path: Path, created: list[Path] | None = None) -> None:
    """Unlock the run directory; the folders the claim made (``created``) that the run left empty - a run
    refused before it wrote anything - are removed, so a refusal leaves nothing behind."""
    # A stale lock would only refuse a later run into the same folder, by name.
    with contextlib.suppress(OSError):
        (path / LOCK_NAME).unlink()
    for folder in created or []:
        try:
            folder.rmdir()  # only an empty folder goes: one that holds anything stays as it is
        except OSError:
            break


def check_output_file(flag: str, value: str | None) -> None:
    """--json PATH / --html PATH / --trace PATH: its folder must exist and take a new file; it is not a folder."""
    if value is None or value == "-":
        return
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, not a file")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)  # as the writers would; made now, before the run, not after
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create the folder {parent} ({_problem(exc)})") from None
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path}: cannot write there (permission denied)")
