"""The pieces a Boot (boot.py) is made of: each phase and its span per rank, each rank's progress, each bar."""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptprof.bootlog.parse import Bar
from ckptprof.bootlog.words import PhaseKey


@dataclass(slots=True)
class RankSpan:
    start: str | None
    end: str | None = None
    elapsed_s: float | None = None
    end_inferred: bool = False  # no end line: the rank began its next phase then


@dataclass(slots=True)
class PhaseTrack:
    key: PhaseKey
    order: int
    slot: str  # which begin/end pair opened it: says which end line is awaited
    spans: dict[str, RankSpan] = field(default_factory=dict)
    # Opened by a bar alone: replaced by the first phase of the same name that a record opens.
    provisional: bool = False
    awaits: str | None = None  # the end line its begin named (Begin.awaits), else the engine's for the slot
    # It went on in the background beside the next phases (Begin.in_background): a rank's next phase does not end it.
    background: bool = False
    # The boot's event count when a rank last began it: a phase begun again after later ones (vLLM's V2 runner
    # captures its graphs to profile their memory, sizes the KV cache, then captures them again) is the newest again.
    begun_seq: int = 0
    # End lines of other workers that Ray folded into one worker's (`... [repeated 12x across cluster]`): that many
    # ranks may have ended it without a line of their own in the log.
    folded_ends: int = 0
    # Begin and end records applied to it: those every rank logs, and those some releases log from one rank per node
    # (Begin/End.one_rank_per_node). A phase only the latter showed says nothing of the ranks that did not log it.
    every_rank_records: int = 0
    one_rank_records: int = 0

    @property
    def newness(self) -> tuple[int, int]:
        """Which phase is the boot's newest: the one begun last, then the one created last."""
        return self.begun_seq, self.order

    def running(self) -> bool:
        """Whether some rank's span of it has not ended, more of them than the end lines Ray folded away."""
        return self.unended() > self.folded_ends

    def unended(self) -> int:
        return sum(1 for span in self.spans.values() if span.end is None)

    def silent_ranks_expected(self) -> bool:
        """Whether only records that some releases log from one rank per node showed this phase."""
        return self.one_rank_records > 0 and self.every_rank_records == 0

    def ends_folded(self) -> bool:
        """Whether the ranks that show no end are accounted for by end lines Ray folded into another worker's."""
        return 0 < self.unended() <= self.folded_ends

    @property
    def name(self) -> str:
        return self.key[0]


@dataclass(slots=True)
class RankState:
    begun: dict[str, int] = field(default_factory=dict)  # how many begins per slot, for the n-th rule
    open: dict[str, PhaseKey] = field(default_factory=dict)  # slot -> phase currently open on this rank
    phases_seen: set[str] = field(default_factory=set)  # names of the phases this rank has begun
    models_loaded: set[str] = field(default_factory=set)  # whose weights this rank has begun loading
    last_end: str | None = None
    last_event_seq: int = -1
    # The phase whose records ended but whose engine step had not, when nothing else has begun or ended since
    # (End.step_goes_on): a failure now is in it.
    unfinished: PhaseKey | None = None


@dataclass(slots=True)
class BarTrack:
    desc: str
    phase: PhaseKey | None
    last: Bar  # the newest frame
    moved_at: str | None

    @property
    def done(self) -> int:
        return self.last.done

    @property
    def total(self) -> int:
        return self.last.total

    @property
    def model(self) -> str | None:
        return self.phase[1] if self.phase else None
