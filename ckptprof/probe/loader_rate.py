"""What fastsafetensors reaches on this machine, used the way SGLang uses it: a few of the checkpoint's own files.

SGLang's ``--load-format fastsafetensors`` makes one ``SafeTensorsFileLoader`` per file (per batch of one file per
rank), reads the file whole into device memory (GPUDirect Storage when it is there, else parallel O_DIRECT
preads into pinned bounce buffers), hands its tensors out, and closes the loader before the next file. No
storage or PCIe ceiling prices that: its reads bypass the page cache (a warm load reads storage again), run at
the rate of its own 16 threads over one file, and each file pays a setup (a device buffer, the loader's threads
and bounce buffers), so a storage probe of the same files overprices it (the GPU figures:
reports/h200/2026-11-30g-h200-release-profile-predictions).

So the package itself is timed on a sample of the checkpoint's files of different sizes, one loader per file as
SGLang does, each file on its own; every file of the checkpoint is then priced by its size from those points
(``ckptprof.rates.seconds_for``). When the package or a CUDA device is missing nothing is measured, and the verdict falls back to
a bound from the storage and PCIe ceilings, which it labels as such.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ckptprof.optional import optional_package
from ckptprof.units import GB

# The sample: up to this many bytes (and files) of the checkpoint, spread over its file sizes.
DEFAULT_SAMPLE_BYTES = 1_500_000_000
MAX_SAMPLE_FILES = 8

LoadOne = Callable[[Path], None]
Clock = Callable[[], float]


def pick_sample(sizes: Sequence[tuple[Path, int]], budget: int, most: int = MAX_SAMPLE_FILES) -> list[Path]:
    """Files spread over the checkpoint's sizes (smallest to largest quantiles), within ``budget`` bytes.

    Different sizes are what the pricing of each file by its size interpolates between; a file that would
    overflow the budget is skipped, never cut (a loader reads whole files)."""
    ordered = sorted((size, str(path), path) for path, size in sizes if size > 0)
    if not ordered:
        return []
    count = min(most, len(ordered))
    picks = sorted({round(i * (len(ordered) - 1) / max(count - 1, 1)) for i in range(count)})
    chosen: list[Path] = []
    spent = 0
    for index in picks:
        size, _, path = ordered[index]
        if spent + size <= budget or not chosen:
            chosen.append(path)
            spent += size
    return chosen


def measure(
    files: Sequence[tuple[Path, int]],
    load_one: LoadOne,
    budget: int = DEFAULT_SAMPLE_BYTES,
    clock: Clock = time.perf_counter,
) -> dict[str, Any]:
    """Time ``load_one`` on each file of a sample of ``files``, after one untimed warm-up on the smallest."""
    sample = pick_sample(files, budget)
    if not sample:
        return {}
    sizes = dict(files)
    load_one(sample[0])  # the package's first use (its threads, CUDA handles) is not a per-file cost
    timed: list[tuple[int, float]] = []
    for path in sample:
        start = clock()
        load_one(path)
        timed.append((sizes[path], clock() - start))
    nbytes = sum(b for b, _ in timed)
    seconds = sum(s for _, s in timed)
    if nbytes <= 0 or seconds <= 0:
        return {}
    return {
        "fastsafetensors_GBps": round(nbytes / seconds / GB, 3),
        "fastsafetensors_sample": [[b, round(s, 5)] for b, s in sorted(timed)],
        "fastsafetensors_sample_files": len(timed),
        "fastsafetensors_sample_bytes": nbytes,
    }


def fastsafetensors_available() -> bool:
    return optional_package("fastsafetensors") is not None


def fastsafetensors_loader(device: str) -> LoadOne | None:
    """A function that loads one file as SGLang's iterator does (its own loader, every tensor taken, closed),
    or None when the package is missing or the device is not CUDA."""
    if not device.startswith("cuda"):
        return None
    fst = optional_package("fastsafetensors")
    if fst is None:
        return None
    import torch

    def load_one(path: Path) -> None:
        loader = fst.SafeTensorsFileLoader(fst.SingleGroup(), device, nogds=False)
        try:
            loader.add_filenames({0: [str(path)]})
            buffers = loader.copy_files_to_device()
            try:
                for name in list(buffers.key_to_rank_lidx):
                    buffers.get_tensor(name)
            finally:
                buffers.close()
        finally:
            loader.close()
        torch.cuda.synchronize(device)

    return load_one


def measure_fastsafetensors(
    paths: Sequence[Path], devices: Sequence[str], budget: int = DEFAULT_SAMPLE_BYTES
) -> tuple[dict[str, Any], list[str]]:
    """The fastsafetensors fit on the first CUDA device, and notes; nothing when it cannot be measured here."""
    cuda = [d for d in devices if d.startswith("cuda")]
    if not cuda or not paths:
        return {}, []
    load_one = fastsafetensors_loader(cuda[0])
    if load_one is None:
        return {}, []
    sizes = [(path, path.stat().st_size) for path in paths]
    try:
        return measure(sizes, load_one, budget), []
    except Exception as exc:  # a loader that fails here fails the same way in the replay, which says so
        return {}, [f"fastsafetensors could not be measured: {type(exc).__name__}: {exc}"]
