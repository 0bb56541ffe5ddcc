"""What ``ckptprof log`` reports: plain frozen records, and their JSON (the contract in DESIGN.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PhaseReport:
    name: str
    model: str | None
    variant: str | None
    start: str | None
    end: str | None
    seconds: float | None
    ranks: int
    slowest_rank: str | None
    # ``seconds`` is what the log states ("took 5.38 seconds", "elapsed=20.02 s"), not read off its timestamps.
    stated: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PhaseReport:
        """Read back what ``to_dict`` wrote (a session keeps the server's load phases this way)."""
        seconds = d.get("seconds")
        return cls(
            name=str(d.get("name") or ""),
            model=d.get("model"),
            variant=d.get("variant"),
            start=d.get("start"),
            end=d.get("end"),
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            ranks=int(d.get("ranks") or 0),
            slowest_rank=d.get("slowest_rank"),
            stated=bool(d.get("stated")),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "model": self.model,
            "start": self.start,
            "end": self.end,
            "seconds": self.seconds,
            "ranks": self.ranks,
            "slowest_rank": self.slowest_rank,
            "variant": self.variant,
            "stated": self.stated,
        }


@dataclass(frozen=True)
class ProgressReport:
    desc: str
    model: str | None
    done: int
    total: int
    rate: float | None
    elapsed_s: int | None
    eta_s: int | None

    def to_dict(self) -> dict[str, object]:
        return {
            "desc": self.desc,
            "model": self.model,
            "done": self.done,
            "total": self.total,
            "rate": round(self.rate, 3) if self.rate is not None else None,
            "elapsed_s": self.elapsed_s,
            "eta_s": self.eta_s,
        }


@dataclass(frozen=True)
class FailureReport:
    """The failure that ended the boot: who, while doing what, and the error line."""

    rank: str  # the rank's whole tag ("TP3", "DP1 TP3", "rank3"); "" for an untagged process
    phase: str | None  # the boot phase that was running
    model: str | None  # "target" or "draft" when known
    step: str | None  # finer words from the traceback's frames ("draft worker init"), when it had any
    error: str
    timestamp: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "phase": self.phase,
            "model": self.model,
            "step": self.step,
            "error": self.error,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class BootReport:
    framework: str  # "sglang", "vllm" or "unknown"
    state: str  # one of STATES
    phases: tuple[PhaseReport, ...]
    progress: tuple[ProgressReport, ...]
    warnings: tuple[str, ...]
    summary: str
    first_timestamp: str | None
    last_timestamp: str | None
    error: str | None
    filesystem: str | None = None
    boots: int = 1  # how many server starts the log holds
    boot: int = 1  # which of them this report is about (1-based)
    loader: str | None = (
        None  # the weight loader the log shows ("default", "multithread", "runai_streamer", ...)
    )
    # model ("target", "draft") -> the loader its load-weights bar shows, when it shows one
    loaders: dict[str, str] = field(default_factory=dict)
    throughput_GiBps: float | None = None  # the load's throughput, when the loader logged it
    prefetch: str | None = (
        None  # vLLM's checkpoint prefetch into the page cache: "started", "finished in 3.2 s", ...
    )
    failure: FailureReport | None = None
    # The engine's own account of its steps' seconds (SGLang 0.5.2x's `Engine startup timings (s)`: load_weight,
    # kv_cache_allocation, cuda_graph.decode, ...), as stated: a tail excerpt may hold this and no step record.
    startup_timings: dict[str, float] = field(default_factory=dict)
    # Boot records the reader found but whose line prefix it could not read (#33 item 3).
    unparsed_records: int = 0
    # The model the server serves, as its configuration or its load's first record names it; None where none does.
    model_name: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def to_dict(self) -> dict[str, object]:
        return {
            "framework": self.framework,
            "state": self.state,
            "ready": self.ready,
            "phases": [phase.to_dict() for phase in self.phases],
            "progress": [bar.to_dict() for bar in self.progress],
            "warnings": list(self.warnings),
            "summary": self.summary,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "error": self.error,
            "filesystem": self.filesystem,
            "boots": self.boots,
            "boot": self.boot,
            "loader": self.loader,
            "loaders": dict(self.loaders),
            "throughput_GiBps": self.throughput_GiBps,
            "prefetch": self.prefetch,
            "startup_timings": dict(self.startup_timings),
            "failure": self.failure.to_dict() if self.failure else None,
            "unparsed_records": self.unparsed_records,
            "model_name": self.model_name,
        }
