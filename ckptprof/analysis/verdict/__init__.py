"""The verdict: which limit binds, with achieved vs ceiling numbers, and the SGLang flags to try.

Pure: reads a Session (its ranks and its ceilings), returns a ``Verdict``. No torch, no I/O. The steps, each in its
own module, lowest first:

- ``figures``: the numbers the verdict stands on (rates, cold fraction, amplification, the load's floor);
- ``completeness``: what the run did not finish;
- ``classify``: which limit binds, from the figures;
- ``wording``: the summary, the caveats and one line per remedy;
- ``remedies``: what to try, each flag priced from the measured ceilings;
- ``compose``: ``compute_verdict``, which wires them into one ``Verdict``.

The names below are the package's public surface; callers import them from ``ckptprof.analysis.verdict``.
"""

from __future__ import annotations

from ckptprof.analysis.verdict.classify import (
    BOTTLENECKS,
    CLOSE_SHARE,
    PHASE_BOTTLENECK,
    SKEW_LIMIT,
    Classification,
    classify,
    close_phases,
)
from ckptprof.analysis.verdict.completeness import completed_bytes, incomplete_work
from ckptprof.analysis.verdict.compose import compute_verdict
from ckptprof.analysis.verdict.figures import Figures, cold_fraction, read_figures, storage_amplification
from ckptprof.analysis.verdict.remedies import (
    FASTST_FLAG,
    MT_FLAG,
    NO_MMAP_FLAG,
    PREFETCH_FLAG,
    WHOLE_FILE_DESERIALIZE_PASSES,
)
from ckptprof.analysis.verdict.wording import (
    ABOVE_CEILING,
    MMAP_STRATEGIES,
    PHASE_WORDS,
    bound_figure,
    limit_word,
)

__all__ = [
    "ABOVE_CEILING",
    "BOTTLENECKS",
    "CLOSE_SHARE",
    "FASTST_FLAG",
    "MMAP_STRATEGIES",
    "MT_FLAG",
    "NO_MMAP_FLAG",
    "PHASE_BOTTLENECK",
    "PHASE_WORDS",
    "PREFETCH_FLAG",
    "SKEW_LIMIT",
    "WHOLE_FILE_DESERIALIZE_PASSES",
    "Classification",
    "Figures",
    "bound_figure",
    "classify",
    "close_phases",
    "cold_fraction",
    "completed_bytes",
    "compute_verdict",
    "incomplete_work",
    "limit_word",
    "read_figures",
    "storage_amplification",
]
