"""A network file system on the development machine: a synthetic EAGLE-3 draft served over sshfs from a private
sshd behind a veth pair capped at 800 Mbit/s (the test suite's fixture), replayed by 4 TP ranks on CPU, cold and
warm, then the same checkpoint on local disk. CPU only: 'h2d' is the labelled host-copy stand-in.

Usage (repository root, as root): python reports/cpu/sshfs_campaign.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))

from conftest import sshfs_mounted

from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main


def run(ckpt: Path, out: Path, cache: str) -> None:
    code = main(
        [
            "run",
            str(ckpt),
            "--tp",
            "4",
            "--devices",
            "cpu",
            "--cache",
            cache,
            "--faithful",
            "-q",
            "--probe-sample",
            "256MB",
            "-o",
            str(out),
        ]
    )
    print(f"{out.name}: exit {code}")


def main_() -> None:
    out = Path(sys.argv[1])
    with sshfs_mounted() as m:
        synthesize(m.source / "eagle3", preset="eagle3-draft", shards=64, size=256_000_000, seed=5)
        print(f"mounted over sshfs: {m.how}")
        for cache in ("cold", "warm"):
            run(m.mount / "eagle3", out / f"sshfs-tp4-{cache}", cache)
        local = out / "local-ckpt"
        synthesize(local, preset="eagle3-draft", shards=64, size=256_000_000, seed=5)
        for cache in ("cold", "warm"):
            run(local, out / f"local-tp4-{cache}", cache)


if __name__ == "__main__":
    main_()
