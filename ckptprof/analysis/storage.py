"""Storage's share of a load: what each attribution in the session says, which one every view shows, and whether
they disagree beyond their noise.

A session can hold up to four storage figures, each a share of a different wall and each blind somewhere:

- cold minus warm (``run --cache cold,warm``): (cold wall - warm wall) / cold wall of the same load;
- kernel-sampled: SGLang's own threads sampled while they loaded unchanged (``--sample-threads``);
- device busy: the block device's busy time during SGLang's own load (``--faithful``, io_ticks);
- decomposed replay: the replay's per-phase clocks, storage's share of rank time (every run).

The rule, the first one present is trusted (docs/how-it-measures.md, "One storage figure"): cold minus warm needs
no model of where the time went, so nothing inside the load can be misattributed; the sampled share sees SGLang's own
unchanged load, but only the waits the guest kernel sees; the device's busy time is SGLang's own load too, but blind
to reads held above the device; the decomposed replay times its phases one after the other. Two figures disagree when
they differ by more than their noises added in quadrature. Pure: reads a Session.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ckptprof.analysis.attribution import path_attribution, run_totals, sampled_attribution
from ckptprof.session import Session

# How far each figure moves between identical runs, in share points (docs/how-it-measures.md, "Noise"): phase shares
# up to 8 points on the 2-core VM (10 taken, as for a tie); the sampled share 8 points under the cold/warm difference
# in the worst of nine H200 pairs; walls, hence cold minus warm, drift like the shares.
NOISE = {"cold_minus_warm": 0.10, "sampled": 0.08, "device_busy": 0.10, "decomposed": 0.10}
NAMES = {
    "cold_minus_warm": "cold minus warm",
    "sampled": "kernel-sampled",
    "device_busy": "device busy",
    "decomposed": "decomposed replay",
}
OF = {
    "cold_minus_warm": "of the cold load's wall",
    "sampled": "of SGLang's own wall",
    "device_busy": "of SGLang's own wall",
    "decomposed": "of rank time",
}
WHY = {
    "cold_minus_warm": "it times the same load with and without the storage path, so nothing inside the load can be "
    "misattributed (on a virtual machine the hypervisor's I/O shows as guest CPU time, which the other attributions "
    "count as copies or CPU)",
    "sampled": "it samples SGLang's own threads in the kernel while they load unchanged",
    "device_busy": "it is the block device's busy time during SGLang's own load",
    "decomposed": "it is the only storage figure this run measured",
}
# The name every view gives the trusted figure.
LABEL = "storage share"


@dataclass(frozen=True)
class StorageEstimate:
    key: str
    share: float

    @property
    def name(self) -> str:
        return NAMES[self.key]

    @property
    def noise(self) -> float:
        return NOISE[self.key]

    def text(self) -> str:
        """'85% of the cold load's wall (cold minus warm)'."""
        return f"{100 * self.share:.0f}% {OF[self.key]} ({self.name})"


@dataclass(frozen=True)
class StorageFigure:
    """The storage share every view shows, the others beside it, and those that disagree with it."""

    trusted: StorageEstimate
    others: tuple[StorageEstimate, ...]
    disagreeing: tuple[StorageEstimate, ...]

    @property
    def why(self) -> str:
        return WHY[self.trusted.key]

    def value(self) -> str:
        """The figure as every view shows it under LABEL: the trusted share, then the others, named."""
        text = self.trusted.text()
        if self.others:
            text += "; also " + ", ".join(o.text() for o in self.others)
        return text

    def disagreement(self) -> str | None:
        """The sentence a headline carries when the figures disagree beyond their noise (None when they agree)."""
        if not self.disagreeing:
            return None
        said = ", ".join(f"{o.name} {100 * o.share:.0f}%" for o in self.disagreeing)
        return (
            f"storage figures disagree beyond their noise: {self.trusted.name} says "
            f"{100 * self.trusted.share:.0f}%, {said}; the {LABEL} shown is {self.trusted.name}'s, because {self.why}"
        )


def storage_estimates(session: Session) -> list[StorageEstimate]:
    """Every storage figure the session holds, most trusted first."""
    out = []
    referee = _referee(session)
    if referee is not None:
        out.append(StorageEstimate("cold_minus_warm", referee))
    sampled = sampled_attribution(session)
    if sampled is not None:
        out.append(StorageEstimate("sampled", sampled["storage"]))
    on_path, source = path_attribution(session)
    if on_path is not None and source and source.startswith("io_ticks"):
        out.append(StorageEstimate("device_busy", on_path["storage"]))
    if any(m.shards for r in session.ranks for m in r.models):
        out.append(StorageEstimate("decomposed", run_totals(session).shares()["storage"]))
    return out


def storage_figure(session: Session) -> StorageFigure | None:
    """The trusted storage share and the figures that disagree with it; None for a session with no timings."""
    estimates = storage_estimates(session)
    if not estimates:
        return None
    trusted, others = estimates[0], tuple(estimates[1:])
    disagreeing = tuple(o for o in others if disagree(trusted, o))
    return StorageFigure(trusted, others, disagreeing)


def disagree(a: StorageEstimate, b: StorageEstimate) -> bool:
    """Whether two figures differ by more than their noises added in quadrature (independent errors)."""
    return abs(a.share - b.share) > math.hypot(a.noise, b.noise)


def _referee(session: Session) -> float | None:
    """Cold minus warm over the cold wall, from a complete ``--cache cold,warm`` run (None otherwise)."""
    extra: Any = session.extra
    referee = extra.get("cache_referee") if hasattr(extra, "get") else None
    if not isinstance(referee, dict) or referee.get("incomplete"):
        return None
    share = referee.get("storage_share")
    return max(0.0, float(share)) if isinstance(share, (int, float)) else None
