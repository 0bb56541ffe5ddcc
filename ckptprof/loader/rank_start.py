"""Where rank processes come from: a fork server that imported torch once, not a fresh interpreter per rank.

Spawning costs every rank a new interpreter and its own ``import torch``: 2.8-3.7 s on a 2-core VM, more than the
whole load of a small checkpoint, once per rank in every pass. Here a fork server (multiprocessing's ``forkserver``)
imports torch and the rank's code once, started with the run so that its imports overlap the run's setup and probe;
each rank is then a fork of it, in milliseconds. The ranks are not forks of the run's own process: that one may
hold a CUDA context and OpenMP's threads (the probe ran there), which a forked child must not inherit. The server
imports torch and never runs a kernel, so it holds neither.

What a server fixes when it starts is what its forks see: the environment (libraries read some of it once, at
import: OMP_NUM_THREADS) and where standard output and error go. A start finds the server it would use; if either
changed since that server began (a caller that sets a variable between runs, pytest's capture), it is stopped and
a fresh one begins, unless a rank it forked is still alive. ``CKPTPROF_RANK_START=spawn`` goes back to spawning every rank.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
import weakref
from multiprocessing import forkserver
from typing import Any

from ckptprof.errors import UsageError

# What every rank imports before it replays anything: imported once, in the server.
PRELOAD = ["ckptprof.loader.rank_preload"]
ENV_START_METHOD = "CKPTPROF_RANK_START"

_lock = threading.Lock()
_started_with: tuple[Any, ...] | None = None


def start_method() -> str:
    """``forkserver`` where the platform has it, unless ``CKPTPROF_RANK_START`` asks for ``spawn``."""
    wanted = os.environ.get(ENV_START_METHOD, "forkserver")
    if wanted not in ("forkserver", "spawn"):
        raise UsageError(f"{ENV_START_METHOD}={wanted!r}: expected forkserver or spawn")
    if wanted == "forkserver" and "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return wanted


def _what_forks_inherit() -> tuple[Any, ...]:
    streams: list[tuple[int, int] | None] = []
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
            streams.append((st.st_dev, st.st_ino))
        except OSError:
            streams.append(None)
    return (tuple(sorted(os.environ.items())), tuple(streams))


def context() -> Any:
    """The multiprocessing context to start ranks from, its fork server (when it has one) running and current."""
    import torch.multiprocessing as mp

    method = start_method()
    ctx = mp.get_context(method)
    if method == "forkserver":
        _ensure(restart_if_stale=True)
    return ctx


def warm() -> None:
    """Start the fork server now, if ranks start from one and none is running: it imports torch while the caller
    goes on. A server already running is kept even if it is stale: the ranks' start replaces it, so a caller that
    warms and then starts no rank (a refused run) costs nothing more."""
    if start_method() == "forkserver":
        _ensure(restart_if_stale=False)


def _ensure(restart_if_stale: bool) -> None:
    global _started_with
    with _lock:
        server: Any = forkserver._forkserver
        running = server._forkserver_pid is not None
        now = _what_forks_inherit()
        # A server's forks die with it (PR_SET_PDEATHSIG): one with a rank alive (the pytest plugin's resident
        # ranks) is kept even if stale, and the rank's start applies the caller's environment (apply_environment).
        replace = (
            running and restart_if_stale and _started_with != now and not any(p.is_alive() for p in _forks)
        )
        if running and not replace:
            server.ensure_running()  # starts it again if it died
            return
        if replace:
            server._stop()
        server.set_forkserver_preload(PRELOAD)
        server.ensure_running()
        _started_with = now
        if not _stop_registered:
            _register_stop()


def track(proc: Any) -> None:
    """Remember a rank started from the server, so that the server is not replaced while the rank lives."""
    _forks.add(proc)


def environment() -> dict[str, str]:
    """The caller's environment, for ``apply_environment`` in the rank."""
    return dict(os.environ)


def apply_environment(env: dict[str, str] | None) -> None:
    """In a rank: the environment of the process that started it, not the fork server's (see the module's note)."""
    if env is not None and env != os.environ:
        os.environ.clear()
        os.environ.update(env)


_forks: weakref.WeakSet[Any] = weakref.WeakSet()
_stop_registered = False


def _register_stop() -> None:
    """At exit, the server goes with this process at once. Left alone it would notice only after its imports (seconds
    of a core, for a run refused right after it started) and any rank still alive goes with it (PR_SET_PDEATHSIG)."""
    global _stop_registered
    _stop_registered = True

    def stop() -> None:
        server: Any = forkserver._forkserver
        pid = server._forkserver_pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)

    atexit.register(stop)
