"""Ctrl-C and SIGTERM while a command runs: the first one stops the work, none may stop the saving.

A run that is interrupted saves what it measured. The first SIGINT or SIGTERM raises KeyboardInterrupt where the
work is (the probe, the cache preparation, a replay pass); every later one is counted and ignored, so a second
Ctrl-C pressed while the ranks are being stopped and the partial session written cannot lose that session.
Inside ``deferred()`` (the final writes) even the first one only counts; the caller asks ``received()`` after.
Stopping the ranks is bounded (a few seconds): a rank that no signal ends (waiting in the kernel on a file system
that stopped answering) is left behind and named, never waited for (loader/ranks.py). SIGKILL always ends the
process.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_HANDLED = (signal.SIGINT, signal.SIGTERM)


class _State:
    def __init__(self) -> None:
        self.count = 0
        self.first: int | None = None
        self.defer = 0


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    _state.count += 1
    if _state.first is None:
        _state.first = signum
    if _state.count == 1 and _state.defer == 0:
        raise KeyboardInterrupt


_installed = False


def install() -> None:
    """Route SIGINT and SIGTERM through the handler for the rest of the process (the console entry point)."""
    global _state, _installed
    _state = _State()
    for sig in _HANDLED:
        signal.signal(sig, _handler)
    _installed = True


def ignore_from_now() -> None:
    """The command is over and the process exits: a signal from now on is ignored. (A Python handler would not do:
    the interpreter puts the default action back while it shuts down, and a second Ctrl-C landing then would kill
    the process by SIGINT instead of letting it exit 130.)"""
    for sig in _HANDLED:
        signal.signal(sig, signal.SIG_IGN)


@contextmanager
def installed() -> Iterator[None]:
    """Route SIGINT and SIGTERM through the handler for the duration of a command (main thread only); inside the
    console entry point, which installed it for the whole process, nothing changes."""
    if _installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    global _state
    _state = _State()
    previous = {sig: signal.signal(sig, _handler) for sig in _HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block no signal raises; ``received()`` says afterwards whether one came."""
    _state.defer += 1
    try:
        yield
    finally:
        _state.defer -= 1


def received() -> bool:
    return _state.count > 0


def description() -> str:
    """How the run was interrupted, for notes: 'Ctrl-C' or 'SIGTERM' (Ctrl-C when nothing was recorded: a
    KeyboardInterrupt raised by Python's own handler, e.g. under the API)."""
    return "SIGTERM" if _state.first == signal.SIGTERM else "Ctrl-C"
