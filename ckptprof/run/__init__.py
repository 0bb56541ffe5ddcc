"""One run from request to session: what the user asked (``RunRequest``), every choice made from it (``resolve`` ->
``RunConfig``: engine, release profile, strategies, order), and the run itself (``execute`` -> ``RunOutcome``).

The command line and ``ckptprof.replay()`` both go through here, so they cannot disagree on a default.
"""

from __future__ import annotations

from ckptprof.run.execute import RunOutcome, execute, replay, run_request, warm_rank_server
from ckptprof.run.policy import RunConfig, resolve
from ckptprof.run.request import RunRequest

__all__ = [
    "RunConfig",
    "RunOutcome",
    "RunRequest",
    "execute",
    "replay",
    "resolve",
    "run_request",
    "warm_rank_server",
]
