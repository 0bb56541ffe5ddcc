"""All ceilings in one call: what ``ckptprof run`` stores in ``session.ceilings`` and ``ckptprof probe`` prints."""

from __future__ import annotations

import re
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckptprof import inprogress
from ckptprof.devices import default_device_spec, parse_devices
from ckptprof.errors import CheckpointError, os_problem
from ckptprof.probe import contention, loader_rate, memcpy, storage, transfer, warm_pipeline

_RANGE = re.compile(r"^(\d+)-(\d+)$")


def measure_ceilings(
    paths: list[Path],
    devices: list[str],
    sample_bytes: int = storage.DEFAULT_SAMPLE_BYTES,
    streams: int | None = None,
    progress: bool = True,
    transfer_bytes: int = transfer.DEFAULT_TRANSFER_BYTES,
    into: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Storage (when ``paths`` is not empty), page cache, memcpy and H2D ceilings, merged into one JSON-safe dict.

    ``notes`` collects every caveat (drop not verified, no CUDA, ...); ``probe_s`` is how long probing took.
    ``into`` receives each ceiling as soon as it is measured, so an interrupted probe still leaves the finished ones.
    Other ckptprof runs in progress meanwhile (or a device busy with others' reads) are noted as contention.
    """
    with inprogress.registered("probe", sorted({str(Path(p).parent) for p in paths})):
        started = time.time()
        out = _measure(paths, devices, sample_bytes, streams, progress, transfer_bytes, into)
        crowded = contention.other_runs_note(started)
        if crowded:
            out["notes"].append(crowded)
        return out


def _measure(
    paths: list[Path],
    devices: list[str],
    sample_bytes: int,
    streams: int | None,
    progress: bool,
    transfer_bytes: int,
    into: dict[str, Any] | None,
) -> dict[str, Any]:
    log = _stderr_log if progress else None
    t0 = time.perf_counter()
    out: dict[str, Any] = {} if into is None else into
    notes: list[str] = out.setdefault("notes", [])
    if paths:
        st = storage.measure_storage(paths, sample_bytes=sample_bytes, streams=streams, log=log)
    else:
        st = storage.empty_storage_result()
        st["notes"] = ["no checkpoint path: storage and page-cache ceilings not measured"]
    notes.extend(st.pop("notes"))
    out.update(st)
    if log:
        log("memcpy: host copy, 1 and N threads")
    out.update(memcpy.measure_memcpy(threads=streams))
    tr = transfer.measure_transfer(devices, nbytes=transfer_bytes, log=log)
    notes.extend(tr.pop("notes"))
    out.update(tr)
    cuda = transfer.cuda_devices(devices)
    if paths and cuda:
        if log:
            log(
                "warm pipeline: the page cache read into pinned buffers and copied to the device(s), both at once"
            )
        warm = warm_pipeline.measure_warm_pipeline(paths, cuda)
        notes.extend(warm.pop("notes"))
        out.update(warm)
    if paths and cuda and loader_rate.fastsafetensors_available():
        if log:
            log(
                "fastsafetensors: a sample of the files, one loader each (SGLang's --load-format fastsafetensors)"
            )
        rates, rate_notes = loader_rate.measure_fastsafetensors(paths, devices)
        notes.extend(rate_notes)
        out.update(rates)
    out["probe_s"] = round(time.perf_counter() - t0, 3)
    return out


# What a prediction check measures again just before each replay it checks: enough to see a drift, little time.
RECHECK_SAMPLE_BYTES = 512 * 1024 * 1024


def measure_storage_now(
    paths: list[Path], devices: list[str], streams: int | None, fastsafetensors: bool
) -> dict[str, Any]:
    """The ceilings that drift while a run goes on, measured again: cold storage reads (1 and N streams, no page
    cache) and, when asked, fastsafetensors' own timings. A cloud volume spending its burst credits or a shared
    file server can lose much of its rate within minutes (reports/h200/2026-11-30j-h200x2-predictions-checked),
    and a prediction made from the first figure then misses by that much without the model being wrong."""
    out = storage.measure_storage(paths, sample_bytes=RECHECK_SAMPLE_BYTES, streams=streams, page_cache=False)
    out.pop("notes", None)
    if fastsafetensors and any(d.startswith("cuda") for d in devices):
        rates, _ = loader_rate.measure_fastsafetensors(paths, devices)
        out.update(rates)
    return {
        key: value for key, value in out.items() if value is not None and not key.startswith("page_cache")
    }


def _stderr_log(msg: str) -> None:
    print(f"ckptprof probe: {msg}", file=sys.stderr, flush=True)


def parse_device_spec(spec: str, visible_cuda: int | None = None) -> list[str]:
    """``cpu``, ``cuda`` (all visible), ``cuda:0-7``, ``cuda:0,3``, ``0,1`` or ``2-3`` -> device names.

    The same grammar as ``ckptprof run --devices`` (one parser for both); raises UsageError on anything it
    cannot honour. ``visible_cuda`` overrides the number of CUDA devices torch reports.
    """
    return parse_devices(spec or "cpu", visible_cuda)


def default_devices() -> list[str]:
    """Every visible GPU, else the CPU: ``--devices``' default, as ``run`` has it."""
    return parse_device_spec(default_device_spec())


def collect_paths(args: Sequence[str]) -> list[Path]:
    """The files to probe: a directory's weight files (found as SGLang finds them), or files named directly.

    Raises CheckpointError naming the path when it is missing, unreadable or holds no weight files.
    """
    files: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            from ckptprof.checkpoint.discovery import discover

            files.extend(discover(path).files)
        else:
            files.append(_readable_file(path))
    return list(dict.fromkeys(files))


def _readable_file(path: Path) -> Path:
    try:
        st = path.stat()
        # Check the type before opening: opening a FIFO for reading would block forever.
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(path, "not a regular file or a checkpoint directory")
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CheckpointError(path, os_problem(exc, "a checkpoint file", directory_too=True)) from None
    return path
