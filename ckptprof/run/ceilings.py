"""The run's ceilings: measured before the first replay (keeping what an interrupt left), and measured again when a
replay fetched from storage faster than the probe said storage could."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ckptprof.checkpoint import fs
from ckptprof.loader.plan import ReplayPlan
from ckptprof.results import Ceilings
from ckptprof.session import Session

Printer = Callable[[str], None]


def probe_ceilings(
    session: Session, plan: ReplayPlan, cache: str, sample_bytes: int, progress: bool, say: Printer
) -> None:
    """Measure the storage, page-cache and host-to-device ceilings into ``session.ceilings``."""
    from ckptprof.probe.run_probes import measure_ceilings

    files = [f for m in plan.models for f in m.files]
    if cache == "as-is":
        # The storage probe drops and re-reads its sample: "as-is" means as found before ckptprof touched it.
        found = fs.total_resident_bytes(files)
        total = sum(f.stat().st_size for f in files) or 1
        session.notes.append(
            f"as-is: {100 * found / total:.0f}% of the checkpoint was in the page cache before the probes; "
            "the storage probe drops and re-reads a sample, so the replay may start from a different state "
            "(each model's cache note says what it found then; use --no-probe to keep the state untouched)"
        )
    say("measuring ceilings (storage, page cache, host-to-device) ...")
    # Filled as each ceiling is measured: an interrupted probe keeps the ones it finished.
    measured: dict[str, Any] = {}
    try:
        measure_ceilings(files, plan.devices, sample_bytes=sample_bytes, progress=progress, into=measured)
    finally:
        session.ceilings = Ceilings.from_dict(measured)


def hold_probe_to_replays(sessions: Sequence[Session], ceilings: Ceilings, say: Printer) -> Ceilings:
    """The storage probe is a ceiling: when a replay fetched from storage faster than it (beyond the noise), the
    probe measures again with other settings until it holds (probe/learn.py); else ``ceilings`` unchanged."""
    from ckptprof.analysis.strategies import strategy_label
    from ckptprof.probe import learn

    rates = [
        (s.verdict.fetched_GBps or 0.0, strategy_label(s.config))
        for s in sessions
        if s.ok and s.verdict is not None and not s.verdict.incomplete
    ]
    fastest, label = max(rates, default=(0.0, ""))
    probe = ceilings.storage_read_GBps
    if not probe or fastest <= learn.TOLERANCE * probe:
        return ceilings
    files = checkpoint_files(sessions[0])
    if not files:
        return ceilings
    say(
        f"{label} fetched from storage at {fastest:.2f} GB/s, above the probe's {probe:.2f}: measuring the storage again"
    )
    try:
        measure, direct_ok = learn.disk_measure(files)
        return learn.learn(ceilings, fastest, label, measure, direct_ok)
    except OSError as exc:
        note = f"{label} read faster than the storage probe, which could not measure again ({exc})"
        return dataclasses.replace(ceilings, notes=(*ceilings.notes, note))


def checkpoint_files(session: Session) -> list[Path] | None:
    """The session's shard files as SGLang finds them; None when they cannot be listed here."""
    from ckptprof.checkpoint.discovery import discover
    from ckptprof.errors import CheckpointError

    try:
        return [path for model in session.models for path in discover(Path(model.path)).files]
    except (CheckpointError, OSError):
        return None
