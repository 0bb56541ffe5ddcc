"""Ceilings kept from a recent probe of the same file system and devices, so a run need not measure them again.

A default run on a small checkpoint spent more time probing than loading. The ceilings describe the storage
under the checkpoint, the host's memory and the device links - not the checkpoint - so ``ckptprof run`` keeps
each probe's result (in the cache directory) and a later run on the same host, the same file system(s), the same
devices and the same sample size reuses it while it is younger than a maximum age (one hour by default). The
session says so, with the age; ``--reprobe`` measures again. What could have changed since (a busier NFS server,
another tenant on the PCIe switch) is the price of reuse, which is why the age is printed.

A probe stands only for what it measured, so its key holds:
- each file system's mount as /proc/self/mountinfo and statx(2) name it (the unique mount id, mount id, source,
  type and options) and this boot: a new sshfs mount at the same mount point reused the device number (st_dev)
  of the fast mount before it, and would have been quoted the fast mount's rate;
- the size class of the sample it read (a power of two): a 0.26 GB sample of a small checkpoint does not stand
  for a 2.8 GB one;
- for a cold load, the checkpoint's own files (path, size, mtime): the cold figure is the files' own storage.
A probe measured under contention (other ckptprof runs in progress, a busy device: probe/contention.py) is never
kept. A reused probe is described by its age and origin, never as measured in this run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptprof.cachedir import cache_dir
from ckptprof.checkpoint import fs
from ckptprof.probe import contention
from ckptprof.units import age_words
from ckptprof.version import __version__

DEFAULT_MAX_AGE_S = 3600.0
FORMAT = 2
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def max_age_from_env() -> float:
    """CKPTPROF_PROBE_MAX_AGE_S (seconds; 0 turns reuse off), else one hour."""
    text = os.environ.get("CKPTPROF_PROBE_MAX_AGE_S", "").strip()
    if not text:
        return DEFAULT_MAX_AGE_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"CKPTPROF_PROBE_MAX_AGE_S must be a number of seconds, got {text!r}") from None
    return max(0.0, value)


def probe_key(
    files: Sequence[Path], devices: Sequence[str], sample_bytes: int, cache: str | None = None
) -> dict[str, Any]:
    """What must match for a probe to stand for this run: host and boot, file systems (device ids, types and
    mounts), devices, sample size and the size class of the sample actually read, the checkpoint's files when the
    load is cold (``cache``), and ckptprof version (a newer probe may measure differently)."""
    stats = {f: os.stat(f) for f in files}
    # One file per device stands for its mount: reading mountinfo once per shard would cost a 3,000-shard run ~1 s.
    first_per_device = {st.st_dev: f for f, st in reversed(stats.items())}
    filesystems = sorted({(dev, fs.fs_type(f)) for dev, f in first_per_device.items()})
    mounts = {
        json.dumps(m.to_dict(), sort_keys=True): m.to_dict()
        for m in (fs.mount_identity(f) for f in first_per_device.values())
        if m is not None
    }
    total = sum(st.st_size for st in stats.values())
    key: dict[str, Any] = {
        "format": FORMAT,
        "ckptprof": __version__,
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "filesystems": [[dev, kind] for dev, kind in filesystems],
        "mounts": [mounts[k] for k in sorted(mounts)],
        "devices": list(devices),
        "sample_bytes": sample_bytes,
        # The storage probe reads up to twice the sample (two disjoint halves): what it read is this, in powers of 2.
        "sample_class": min(2 * sample_bytes, total).bit_length(),
    }
    if cache == "cold":
        key["checkpoint"] = _files_digest(files)
    return key


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _files_digest(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        st = os.stat(f)
        h.update(f"{os.path.realpath(f)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def _path_for(key: dict[str, Any], base: Path | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return (base or cache_dir()) / "probes" / f"{digest}.json"


@dataclass(frozen=True)
class Reused:
    ceilings: dict[str, Any]
    measured_at: str
    age_s: float
    path: Path
    origin: str = ""  # what the probe read: 'a 16.0 MB sample of /data/ckpt (fuse.sshfs mount 45 ...)'

    def describe(self) -> str:
        """'12 min ago' - how old the reused ceilings are."""
        return f"{age_words(self.age_s)} ago"

    def note(self) -> str:
        """The session's note: the age and origin of the figures, never 'measured in this run'."""
        origin = f" by a run that read {self.origin}" if self.origin else ""
        return (
            f"ceilings reused, not measured in this run: probed {self.describe()} ({self.measured_at}){origin}, "
            "on the same mount(s), devices and sample size class (--reprobe measures them again)"
        )


def lookup(key: dict[str, Any], max_age_s: float, base: Path | None = None) -> Reused | None:
    """The stored ceilings for ``key`` when younger than ``max_age_s``; None otherwise (or when unreadable)."""
    if max_age_s <= 0:
        return None
    path = _path_for(key, base)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("ceilings"), dict):
        return None
    measured = doc.get("measured_unix")
    if not isinstance(measured, (int, float)):
        return None
    age = time.time() - measured
    if age < 0 or age > max_age_s:
        return None  # too old, or a clock that went backwards: measure again
    from ckptprof.session import InvalidField, validate_ceilings

    try:
        validate_ceilings(doc["ceilings"])
    except InvalidField:
        return None
    if contention.is_contended(doc["ceilings"].get("notes") or ()):
        return None  # kept by an older ckptprof that did not know: measured while others used the hardware
    return Reused(doc["ceilings"], str(doc.get("measured_at", "")), age, path, str(doc.get("origin", "")))


def store(
    key: dict[str, Any], ceilings: dict[str, Any], base: Path | None = None, origin: str = ""
) -> Path | None:
    """Keep a fresh probe's ceilings for later runs; None when the cache directory cannot be written (the run
    goes on: reuse is an optimisation) or when the probe was taken under contention (it is no ceiling)."""
    if contention.is_contended(ceilings.get("notes") or ()):
        return None
    path = _path_for(key, base)
    now = time.time()
    doc = {
        "key": key,
        "measured_unix": now,
        "measured_at": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="seconds"),
        "origin": origin,
        "ceilings": {k: v for k, v in ceilings.items() if k != "reused"},
    }
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, ValueError):
        # A full disk (ENOSPC) fails the write part-way or the rename: the temp file must go, or every run leaves
        # one more in the directory that is already full.
        with contextlib.suppress(OSError):  # the directory itself unusable: nothing was left in it
            tmp.unlink(missing_ok=True)
        return None
    return path
