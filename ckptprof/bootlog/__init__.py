"""Reading SGLang and vLLM boot logs: what the server did, for how long, and what it is doing now.

Stands alone: nothing here imports the rest of ckptprof but the engines' log texts (ckptprof/engines/, pure data)
and errors.py, so ``ckptprof log`` stays light and the reader can be reused on its own. phases.py says how the
stages fit together.
"""

from __future__ import annotations

from ckptprof.bootlog import phases as _phases
from ckptprof.bootlog.follow import FollowOutcome, follow_log
from ckptprof.bootlog.parse import LogInputError
from ckptprof.bootlog.phases import STATES, BootLogAnalyzer, analyze_bytes, analyze_path, analyze_stream
from ckptprof.bootlog.report import BootReport, FailureReport, PhaseReport, ProgressReport

# Whether the record-by-record modules were compiled with mypyc (CKPTPROF_COMPILE=1 at install; setup.py).
COMPILED = not _phases.__file__.endswith(".py")

__all__ = [
    "COMPILED",
    "STATES",
    "BootLogAnalyzer",
    "BootReport",
    "FailureReport",
    "FollowOutcome",
    "LogInputError",
    "PhaseReport",
    "ProgressReport",
    "analyze_bytes",
    "analyze_path",
    "analyze_stream",
    "follow_log",
]
