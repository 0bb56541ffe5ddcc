"""Imported by the rank fork server (``rank_start``) before it forks any rank: what every rank needs, once.

Ctrl-C reaches the whole process group, the server too, and the run owns the reaction; the server ignores it from
its first import rather than die with a traceback halfway through importing torch."""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import torch  # noqa: E402,F401

import ckptprof.loader.ranks  # noqa: E402
import ckptprof.loader.resident  # noqa: E402
import ckptprof.loader.worker  # noqa: E402,F401
