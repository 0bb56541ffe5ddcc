"""The storage probe is a ceiling: when a replay fetched from storage faster than it, it measures again until it holds.

A loader that reads faster than the probe proves the probe under-measured this storage (too few streams in flight,
blocks too small for a network file system, or O_DIRECT where the kernel's read-ahead does better). Then every
figure held against the probe misleads: a storage-bound verdict looks like 110% of the ceiling, a prediction made
from it is too slow. So the probe tries other ways of reading the same kind of sample - more streams, larger blocks,
buffered reads with read-ahead - in order of cost, and stops at the first that is within ``TOLERANCE`` of what the
replay reached. It keeps the best figure it found either way, and says which settings gave it; when none holds,
the ceilings say so (the replay may have been helped by a cache in front of the storage or by a token bucket
that refilled between reads).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptprof.probe import storage
from ckptprof.probe.sampling import DIRECT_ALIGN, align_up, choose_sample
from ckptprof.results import Ceilings

# A replay may beat the probe by this much before the probe measures again (measurement noise, not a wrong probe).
TOLERANCE = 1.05
# Bytes each setting reads cold: enough for a rate, little time (a 2 GB/s disk reads it in half a second).
LEARN_SAMPLE_BYTES = 1 << 30


@dataclass(frozen=True)
class Setting:
    """One way of reading the sample cold."""

    streams: int
    block: int
    direct: bool

    def describe(self) -> str:
        how = "O_DIRECT" if self.direct else "buffered with read-ahead"
        return f"{self.streams} streams of {self.block // (1 << 20)} MiB reads, {how}"


@dataclass(frozen=True)
class Tried:
    setting: Setting
    GBps: float


# (the setting, its rate); injectable so the order and the stopping rule are tested without a disk.
Measure = Callable[[Setting], float]


def settings_to_try(streams: int, block: int, direct: bool) -> list[Setting]:
    """Other settings than the probe's own, cheapest first: more in flight, then larger reads, then the other
    read method (a buffered read lets the kernel's read-ahead keep the device busy)."""
    more = [
        Setting(2 * streams, block, direct),
        Setting(2 * streams, 4 * block, direct),
        Setting(4 * streams, 4 * block, direct),
    ]
    if not direct:
        return more
    return [*more, Setting(streams, block, False), Setting(2 * streams, 4 * block, False)]


def learn(
    ceilings: Ceilings,
    achieved_GBps: float,
    achieved_by: str,
    measure: Measure,
    direct_available: bool,
) -> Ceilings:
    """``ceilings`` with the storage figures measured again while a replay's ``achieved_GBps`` beats them; the same
    ceilings when it does not (or when no storage figure was measured)."""
    best = ceilings.storage_read_GBps
    if not best or achieved_GBps <= TOLERANCE * best:
        return ceilings
    streams = ceilings.storage_streams or 1
    block = ceilings.storage_block_bytes or storage.DEFAULT_BLOCK_BYTES
    direct = ceilings.storage_method == storage.METHOD_O_DIRECT
    tried: list[Tried] = []
    for setting in settings_to_try(streams, block, direct):
        if setting.direct and not direct_available:
            continue
        tried.append(Tried(setting, measure(setting)))
        if tried[-1].GBps * TOLERANCE >= achieved_GBps:
            break
    winner = max(tried, key=lambda t: t.GBps, default=None)
    words = "; ".join(f"{t.setting.describe()}: {t.GBps:.2f} GB/s" for t in tried)
    first = (
        f"{achieved_by} fetched from storage at {achieved_GBps:.2f} GB/s, above the probe's "
        f"{best:.2f} GB/s: measured again ({words or 'no other setting to try'})"
    )
    rates = [best, *(t.GBps for t in tried)]
    if winner is None or winner.GBps <= best:
        note = f"{first}; no setting read faster, so the replay was helped by something the probe cannot reproduce"
        return ceilings.with_figures({"notes": [*ceilings.notes, note + _unheld(rates)]})
    held = winner.GBps * TOLERANCE >= achieved_GBps
    note = f"{first}; the ceiling is now {winner.GBps:.2f} GB/s ({winner.setting.describe()})"
    figures = {
        "storage_read_GBps": round(winner.GBps, 3),
        "storage_read_n_streams_GBps": round(
            max(winner.GBps, ceilings.storage_read_n_streams_GBps or 0.0), 3
        ),
        "storage_streams": winner.setting.streams,
        "storage_block_bytes": winner.setting.block,
        "storage_method": storage.METHOD_O_DIRECT
        if winner.setting.direct
        else storage.METHOD_BUFFERED_DROPPED,
        "storage_learned_from": achieved_by,
        "notes": [*ceilings.notes, note + ("" if held else _unheld(rates))],
    }
    return ceilings.with_figures(figures)


def _unheld(rates: Sequence[float]) -> str:
    """Why a replay can still beat every setting: the storage is not one fixed rate."""
    return (
        f" (still below the replay: the storage's own rate moved between {min(rates):.2f} and {max(rates):.2f} GB/s "
        "across these reads, and a cache in front of it or a throughput cap that refilled between reads may have "
        "served the replay faster)"
    )


def disk_measure(paths: Sequence[Path], sample_bytes: int = LEARN_SAMPLE_BYTES) -> tuple[Measure, bool]:
    """A ``Measure`` that reads a sample of ``paths`` cold with each setting (its pages dropped first, as the
    probe's own reads are), and whether O_DIRECT works there."""
    files = [Path(p) for p in paths]
    regions = choose_sample(files, sample_bytes)
    direct_ok = bool(regions) and storage.o_direct_support(regions[0].path)[0]

    def measure(setting: Setting) -> float:
        if not regions:
            return 0.0
        block = align_up(setting.block, DIRECT_ALIGN)
        return storage.cold_read(regions, setting.streams, block, setting.direct).gbps

    return measure, direct_ok
