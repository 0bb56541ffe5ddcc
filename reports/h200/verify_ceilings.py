"""Independent checks of `ckptprof probe` on the device machine (issue 4): fio on the same byte ranges, cold,
O_DIRECT, 16 MiB blocks, 1 job; and a plain 1 GiB pinned / pageable `copy_` per GPU timed with CUDA events.

The storage check reads the same whole files (about the probe's sample size) with the probe's own cold reader and
with fio, alternating, ROUNDS times each: a virtio disk's throughput drifts by 2x within minutes (seen on the lent
machine), so only readings taken side by side compare.

Usage (repository root, after `ckptprof probe DIR --json > probe.json`):
    python3 reports/h200/verify_ceilings.py DIR probe.json FIO_BINARY > verify.json
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from ckptprof.checkpoint import fs
from ckptprof.probe import storage

ROUNDS = 3


def whole_files(files: list[Path], sample_bytes: int) -> list[storage.Region]:
    """Whole files, in order, up to about the probe's sample size: a sample fio can read exactly."""
    regions: list[storage.Region] = []
    for f in files:
        if sum(r.length for r in regions) >= sample_bytes:
            break
        regions.append(storage.Region(f, 0, f.stat().st_size))
    return regions


def fio_cold_read(regions: list[storage.Region], fio: str) -> float:
    """fio reading the same whole files one after another (O_DIRECT, 16 MiB, 1 job), their pages dropped first."""
    fs.drop_cache([r.path for r in regions])
    cmd = [
        fio,
        "--name=ckptprof-verify",
        "--rw=read",
        "--bs=16M",
        "--direct=1",
        "--ioengine=psync",
        "--numjobs=1",
        "--file_service_type=sequential",  # file after file, as the probe reads (fio's default alternates)
        "--output-format=json",
        "--filename=" + ":".join(str(r.path) for r in regions),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]["read"]
    return job["io_bytes"] / (job["runtime"] / 1000.0) / 1e9


def copy_rate(device: str, pinned: bool, nbytes: int = 1 << 30, repeats: int = 7) -> float:
    # Events record on the current device's stream: make ``device`` current, or a copy to cuda:1 is timed by
    # events on cuda:0 (the 2026-11-30 run's cuda:1 "13040 GB/s" was exactly that bug).
    with torch.cuda.device(device):
        return _copy_rate(device, pinned, nbytes, repeats)


def _copy_rate(device: str, pinned: bool, nbytes: int, repeats: int) -> float:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    host.fill_(1)  # fault the pages in before timing
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    rates = []
    for i in range(repeats + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dev.copy_(host, non_blocking=pinned)
        end.record()
        torch.cuda.synchronize(device)
        if i >= 2:
            rates.append(nbytes / (start.elapsed_time(end) / 1e3) / 1e9)
    return statistics.median(rates)


def main() -> None:
    ckpt, probe_path, fio = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    probe = json.loads(probe_path.read_text())
    files = sorted(ckpt.glob("*.safetensors"))
    out: dict[str, object] = {
        "probe_storage_1_stream_GBps": probe["storage_read_1_stream_GBps"],
        "probe_storage_method": probe["storage_method"],
    }
    regions = whole_files(files, int(probe["storage_sample_bytes"]))
    direct = probe["storage_method"] == "o_direct"
    block = int(probe["storage_block_bytes"])
    pairs = []
    for _ in range(ROUNDS):
        ours = storage.cold_read(regions, 1, block, direct).gbps
        theirs = fio_cold_read(regions, fio)
        pairs.append(
            {"probe_GBps": round(ours, 3), "fio_GBps": round(theirs, 3), "ratio": round(ours / theirs, 3)}
        )
    out["side_by_side"] = pairs
    out["fio_cold_o_direct_1_job_GBps"] = statistics.median(p["fio_GBps"] for p in pairs)
    out["probe_cold_1_stream_side_by_side_GBps"] = statistics.median(p["probe_GBps"] for p in pairs)
    out["storage_vs_fio"] = statistics.median(p["ratio"] for p in pairs)
    for i in range(torch.cuda.device_count()):
        d = f"cuda:{i}"
        pinned, pageable = copy_rate(d, True), copy_rate(d, False)
        out[d] = {
            "independent_pinned_GBps": round(pinned, 2),
            "probe_pinned_GBps": probe["h2d_pinned_GBps"].get(d),
            "pinned_ratio": round(probe["h2d_pinned_GBps"].get(d, 0) / pinned, 3),
            "independent_pageable_GBps": round(pageable, 2),
            "probe_pageable_GBps": probe["h2d_pageable_GBps"].get(d),
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
