"""Two sessions side by side (BASE, NEW): wall deltas per model, per rank and per phase, and both verdicts.

Pure: reads two Sessions, returns a ``Comparison``; no I/O. The regression rule lives here, so the CLI's exit
code and any other caller (a CI script, the pytest plugin) agree on what "slower" means.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptprof.analysis.attribution import load_wall, rank_walls, run_totals
from ckptprof.results import Verdict
from ckptprof.session import Session

# Config keys whose difference makes two runs measure different things; listed so a reader is warned.
CONFIG_KEYS = (
    "tp",
    "devices",
    "cache",
    "strategy",
    "strategy_params",
    "draft_strategy",
    "draft_strategy_params",
    "order",
    "faithful",
    "expert_parallel",
    "launcher",
)
# Of those, the ones that move the load wall itself (the ranks' count and devices, what the page cache holds, the
# loading path): a regression gate across them would rule on unlike walls, so it refuses unless told to accept.
# The host is left out on purpose: CI runners of one pool have different names and the same hardware.
WALL_KEYS = (
    "tp",
    "devices",
    "cache",
    "strategy",
    "strategy_params",
    "draft_strategy",
    "draft_strategy_params",
)
# Parameters a session may leave out when there are none (older versions did): absent and empty are the same.
_OPTIONAL_PARAMS = ("strategy_params", "draft_strategy_params")
# Verdict fields shown side by side: (label with its unit, the field).
VERDICT_FIELDS: tuple[tuple[str, Callable[[Verdict], object]], ...] = (
    ("bottleneck", lambda v: v.bottleneck),
    ("achieved GB/s", lambda v: v.achieved_GBps),
    ("load wall s", lambda v: v.load_wall_s),
    ("floor s (from ceilings)", lambda v: v.floor_s),
    ("read amplification x", lambda v: v.read_amplification),
    ("storage amplification x", lambda v: v.storage_amplification),
    ("major faults / GB", lambda v: v.major_faults_per_GB),
    ("rank skew x", lambda v: v.rank_skew),
    ("cold fraction", lambda v: v.cold_fraction),
)


@dataclass(frozen=True)
class Delta:
    """One quantity in BASE and NEW; ``None`` where a session does not have it (a rank or model missing)."""

    label: str
    base: float | None
    new: float | None

    @property
    def change(self) -> float | None:
        return None if self.base is None or self.new is None else self.new - self.base

    @property
    def pct(self) -> float | None:
        """Relative change in percent; ``None`` when BASE is missing or zero (no meaningful ratio)."""
        change = self.change
        if change is None or not self.base:
            return None
        return 100.0 * change / self.base

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "base": self.base,
            "new": self.new,
            "change": self.change,
            "pct": self.pct,
        }


@dataclass(frozen=True)
class Comparison:
    wall: Delta  # the load wall: max over ranks of summed model walls
    models: list[Delta] = field(default_factory=list)  # per role, the slowest rank's wall for that model
    ranks: list[Delta] = field(default_factory=list)  # per rank, its summed model walls
    phases: list[Delta] = field(default_factory=list)  # rank-seconds per phase, summed over ranks
    verdicts: list[tuple[str, Any, Any]] = field(default_factory=list)  # (label, base value, new value)
    summaries: tuple[str, str] = ("", "")
    config_diffs: list[tuple[str, Any, Any]] = field(default_factory=list)
    # Why BASE and NEW did not load the same checkpoint(s) (None: the same, or neither session lists them).
    checkpoint_diff: str | None = None

    @property
    def unlike(self) -> list[tuple[str, Any, Any]]:
        """The configuration differences that make the two load walls unlike (``WALL_KEYS``), as listed."""
        return [d for d in self.config_diffs if d[0] in WALL_KEYS]

    def unlike_words(self) -> str:
        """'tp: BASE 1, NEW 2; cache: BASE cold, NEW warm' - each unlike setting with its two values."""
        return "; ".join(f"{k}: BASE {setting_words(b)}, NEW {setting_words(n)}" for k, b, n in self.unlike)

    def regressed(self, fail_above_pct: float) -> bool:
        """NEW is slower than BASE by more than ``fail_above_pct`` percent of BASE's load wall."""
        pct = self.wall.pct
        return pct is not None and pct > fail_above_pct

    def nonfinite(self) -> str | None:
        """Which load-wall figure is NaN or infinite (the gate cannot rule on it), or None."""
        for name, value in (("BASE load wall", self.wall.base), ("NEW load wall", self.wall.new)):
            if value is not None and not math.isfinite(value):
                return f"{name} is {value}"
        pct = self.wall.pct
        if pct is not None and not math.isfinite(pct):
            return f"the load wall's change is {pct}%"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall": self.wall.to_dict(),
            "models": [d.to_dict() for d in self.models],
            "ranks": [d.to_dict() for d in self.ranks],
            "phases": [d.to_dict() for d in self.phases],
            "verdicts": [{"label": k, "base": b, "new": n} for k, b, n in self.verdicts],
            "summaries": {"base": self.summaries[0], "new": self.summaries[1]},
            "config_diffs": [{"key": k, "base": b, "new": n} for k, b, n in self.config_diffs],
            "unlike": [k for k, _, _ in self.unlike],
            "checkpoint_diff": self.checkpoint_diff,
        }


def _roles(base: Session, new: Session) -> list[str]:
    """Roles in load order (target before draft), as they first appear in either session."""
    roles: list[str] = []
    for s in (base, new):
        for m in s.models:
            if m.role not in roles:
                roles.append(m.role)
        for r in s.ranks:
            for rm in r.models:
                if rm.role not in roles:
                    roles.append(rm.role)
    return roles


def _has_role(session: Session, role: str) -> bool:
    return any(rm.role == role for r in session.ranks for rm in r.models)


def model_deltas(base: Session, new: Session) -> list[Delta]:
    return [
        Delta(
            role,
            load_wall(base, role) if _has_role(base, role) else None,
            load_wall(new, role) if _has_role(new, role) else None,
        )
        for role in _roles(base, new)
    ]


def rank_deltas(base: Session, new: Session) -> list[Delta]:
    b, n = rank_walls(base), rank_walls(new)
    return [Delta(f"rank {r}", b.get(r), n.get(r)) for r in sorted(set(b) | set(n))]


def phase_deltas(base: Session, new: Session) -> list[Delta]:
    tb, tn = run_totals(base), run_totals(new)
    return [
        Delta("read", tb.read_s, tn.read_s),
        Delta("deserialize", tb.deserialize_s, tn.deserialize_s),
        Delta("h2d", tb.h2d_s, tn.h2d_s),
        Delta("other", tb.other_s, tn.other_s),
    ]


def setting_words(value: Any) -> str:
    """A config value in a one-line message: lists space-separated, parameters as key=value, absent as 'none'."""
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _setting(session: Session, key: str) -> Any:
    value = session.config.get(key)
    return (value or None) if key in _OPTIONAL_PARAMS else value


def config_diffs(base: Session, new: Session) -> list[tuple[str, Any, Any]]:
    diffs = [
        (k, _setting(base, k), _setting(new, k)) for k in CONFIG_KEYS if _setting(base, k) != _setting(new, k)
    ]
    hosts = (base.environment.get("host"), new.environment.get("host"))
    if hosts[0] != hosts[1]:
        diffs.append(("host", hosts[0], hosts[1]))
    return diffs


def _checkpoint(session: Session) -> dict[str, tuple[str, int, list[tuple[str, int]]]]:
    """Per role: (path, total bytes, shards as sorted (file, bytes)). Sorted: --order changes only the order."""
    return {
        m.role: (m.path, m.total_bytes, sorted((s.file, s.bytes) for s in m.shards)) for m in session.models
    }


def checkpoint_difference(base: Session, new: Session) -> str | None:
    """Why BASE and NEW did not load the same checkpoint(s), in words; None when they did.

    Two sessions that both list no checkpoint (hand-built ones) are taken as the same; one that lists a
    checkpoint against one that lists none is a difference (nothing says they loaded the same bytes).
    """
    b, n = _checkpoint(base), _checkpoint(new)
    if not b and not n:
        return None
    if set(b) != set(n):
        return f"models differ: BASE loads {sorted(b) or 'none'}, NEW {sorted(n) or 'none'}"
    for role in b:
        (bpath, btotal, bshards), (npath, ntotal, nshards) = b[role], n[role]
        if bpath != npath:
            return f"{role} path differs: BASE {bpath}, NEW {npath}"
        if btotal != ntotal:
            return f"{role} total bytes differ: BASE {btotal}, NEW {ntotal}"
        if bshards != nshards:
            only = [
                f"{who} only {rest[0][0]} ({rest[0][1]} bytes)"
                + (f" and {len(rest) - 1} more" if rest[1:] else "")
                for who, rest in (
                    ("BASE", sorted(set(bshards) - set(nshards))),
                    ("NEW", sorted(set(nshards) - set(bshards))),
                )
                if rest
            ]
            return f"{role} shards differ: {len(bshards)} vs {len(nshards)} files" + "".join(
                f"; {o}" for o in only
            )
    return None


def incomplete(session: Session) -> str | None:
    """Why a session is not a complete run (no ranks, a failed rank or shard), or None."""
    if not session.ranks:
        return "no ranks"
    failed = [r.rank for r in session.ranks if r.status != "ok"]
    if failed:
        return f"rank(s) {failed} did not load"
    for r in session.ranks:
        for m in r.models:
            for s in m.shards:
                if s.status != "ok":
                    return f"rank {r.rank}'s {m.role} shard {s.file} did not load (status {s.status})"
    return None


def compare(base: Session, new: Session) -> Comparison:
    return Comparison(
        wall=Delta("load wall", load_wall(base), load_wall(new)),
        models=model_deltas(base, new),
        ranks=rank_deltas(base, new),
        phases=phase_deltas(base, new),
        verdicts=[
            (
                label,
                None if base.verdict is None else value(base.verdict),
                None if new.verdict is None else value(new.verdict),
            )
            for label, value in VERDICT_FIELDS
        ],
        summaries=(
            base.verdict.summary if base.verdict is not None else "",
            new.verdict.summary if new.verdict is not None else "",
        ),
        config_diffs=config_diffs(base, new),
        checkpoint_diff=checkpoint_difference(base, new),
    )
