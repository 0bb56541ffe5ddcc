"""`ckptprof probe`: what this machine's storage, page cache, memory and PCIe links can do."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tabulate import tabulate

from ckptprof.errors import CheckpointError, UsageError
from ckptprof.units import human_bytes, parse_size

EPILOG = """\
examples:
  ckptprof probe                          memcpy and host-to-device ceilings of every visible GPU
  ckptprof probe /data/eagle3/ckpt        plus cold storage and page-cache reads of that checkpoint
  ckptprof probe /data/ckpt --devices cuda:0-3 --sample 4GB --streams 16 --json

Storage reads are cold: the sample's pages are dropped from the page cache first (nothing is written to the
files) and O_DIRECT is used where the file system allows it. GB = 1e9 bytes.
"""


class ProbeCommand:
    name = "probe"
    help = (
        "Measure the ceilings: cold storage read (1 and N streams), page-cache read, memcpy, H2D per device."
    )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.add_argument(
            "paths",
            nargs="*",
            metavar="PATH",
            help="checkpoint directory or files to read (none: skip the storage and page-cache probes)",
        )
        parser.add_argument(
            "--devices",
            default=None,
            metavar="SPEC",
            help="cpu, cuda (all visible), cuda:0-7 or 0,1 (default: every visible GPU, else cpu)",
        )
        parser.add_argument(
            "--sample",
            default="2GB",
            metavar="SIZE",
            help="bytes of the checkpoint to read per storage measurement (default 2GB, or all if smaller)",
        )
        parser.add_argument(
            "--streams",
            type=int,
            default=None,
            metavar="N",
            help="parallel read streams (default min(8, 2 x cores))",
        )
        parser.add_argument(
            "--transfer-size",
            default="256MiB",
            metavar="SIZE",
            help="bytes per host-to-device copy (default 256MiB)",
        )
        parser.add_argument("--json", action="store_true", help="print the ceilings as one JSON object")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")

    def run(self, args: argparse.Namespace) -> int:
        from ckptprof.probe.run_probes import (
            collect_paths,
            default_devices,
            measure_ceilings,
            parse_device_spec,
        )

        sample = _size_arg("--sample", args.sample)
        transfer_bytes = _size_arg("--transfer-size", args.transfer_size)
        if args.streams is not None and args.streams < 1:
            raise UsageError(f"--streams {args.streams}: must be at least 1")
        devices = parse_device_spec(args.devices) if args.devices else default_devices()
        paths = collect_paths(args.paths)
        try:
            ceilings = measure_ceilings(
                paths,
                devices,
                sample_bytes=sample,
                streams=args.streams,
                progress=not args.quiet,
                transfer_bytes=transfer_bytes,
            )
        except OSError as exc:
            # A shard that vanishes or fails mid-read (EIO, a dropped mount): one line naming it.
            where = exc.filename or ", ".join(str(p) for p in paths) or "probe"
            raise CheckpointError(where, f"read failed: {exc.strerror or exc}") from None
        if args.json:
            print(json.dumps(ceilings, indent=1))
        else:
            print(render_text(ceilings))
        return 0


def _size_arg(flag: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _gbps(value: Any) -> str:
    return "-" if value is None else f"{value:.2f} GB/s"


def render_text(c: dict[str, Any]) -> str:
    """The ceilings as a table a person reads: one line per ceiling, with how it was measured."""
    rows: list[list[str]] = []
    if c.get("storage_read_GBps") is not None:
        how = (
            f"{c['storage_method']}, {human_bytes(c['storage_sample_bytes'])} sample of "
            f"{c['storage_sample_files']} file(s) on {c['fs_type']}"
        )
        if not c.get("storage_cold_verified"):
            how += ", NOT verified cold"
        rows += [
            ["storage read, cold (best)", _gbps(c["storage_read_GBps"]), how],
            ["storage read, cold, 1 stream", _gbps(c["storage_read_1_stream_GBps"]), ""],
            [
                f"storage read, cold, {c['storage_streams']} streams",
                _gbps(c["storage_read_n_streams_GBps"]),
                "",
            ],
            [
                "page-cache read (best)",
                _gbps(c["page_cache_read_GBps"]),
                f"{human_bytes(c['page_cache_sample_bytes'])} warm sample, median of repeats",
            ],
            ["page-cache read, 1 thread", _gbps(c["page_cache_read_1_thread_GBps"]), ""],
            [
                f"page-cache read, {c['storage_streams']} threads",
                _gbps(c["page_cache_read_n_threads_GBps"]),
                "",
            ],
        ]
    rows += [
        [
            "host memcpy, 1 thread",
            _gbps(c.get("memcpy_GBps")),
            f"{human_bytes(c.get('memcpy_bytes') or 0)} copies",
        ],
        [f"host memcpy, {c.get('memcpy_threads')} threads", _gbps(c.get("memcpy_n_threads_GBps")), ""],
        [
            "host copy into fresh memory, 1 thread",
            _gbps(c.get("fresh_write_GBps")),
            "a page fault per 4 KiB too",
        ],
        [
            f"host copy into fresh memory, {c.get('memcpy_threads')} threads",
            _gbps(c.get("fresh_write_n_threads_GBps")),
            "all at once, aggregate (ranks reading whole files)",
        ],
    ]
    if c.get("fastsafetensors_GBps") is not None:
        rows.append(
            [
                "fastsafetensors, one loader per file",
                _gbps(c["fastsafetensors_GBps"]),
                f"{c['fastsafetensors_sample_files']} of the files ({human_bytes(c['fastsafetensors_sample_bytes'])}) "
                "timed one by one, as SGLang loads them",
            ]
        )
    size = human_bytes(c.get("h2d_transfer_bytes") or 0)
    for dev in c.get("h2d_pinned_GBps") or {}:
        rows += [
            [f"H2D pinned {dev}", _gbps(c["h2d_pinned_GBps"][dev]), f"{size} copies, CUDA events, median"],
            [f"H2D pageable {dev}", _gbps(c["h2d_pageable_GBps"].get(dev)), ""],
            [f"D2H pinned {dev}", _gbps(c["d2h_pinned_GBps"].get(dev)), ""],
        ]
    if c.get("h2d_pinned_all_devices_GBps") is not None:
        n = len(c.get("h2d_pinned_GBps") or {})
        rows += [
            [
                "H2D pinned, all devices at once",
                _gbps(c["h2d_pinned_all_devices_GBps"]),
                f"{n} device(s), aggregate",
            ],
            ["H2D pageable, all devices at once", _gbps(c["h2d_pageable_all_devices_GBps"]), ""],
        ]
    if c.get("warm_pipeline_GBps") is not None:
        rows.append(
            [
                "page cache -> pinned -> device",
                _gbps(c["warm_pipeline_GBps"]),
                f"{c.get('warm_pipeline_threads')} threads read {human_bytes(c.get('warm_pipeline_sample_bytes') or 0)} "
                "warm into pinned buffers while each is copied"
                + (
                    f" (to {c['warm_pipeline_devices']} devices in turn)"
                    if (c.get("warm_pipeline_devices") or 1) > 1
                    else ""
                )
                + ": both at once, sharing host memory",
            ]
        )
    out = [tabulate(rows, headers=["ceiling", "rate", "how"], tablefmt="simple", disable_numparse=True)]
    notes = c.get("notes") or []
    if notes:
        out.append("")
        out.extend(f"note: {n}" for n in notes)
    return "\n".join(out)
