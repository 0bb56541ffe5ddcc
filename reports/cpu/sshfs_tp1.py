"""TP1 cold over the network file system of the test suite (sshfs behind an 800 Mbit/s tbf cap): the synthetic
EAGLE-3 draft (64 shards, 256 MB) replayed on CPU with 3 alternated faithful rounds. CPU only: 'h2d' is the labelled
host-copy stand-in.

Usage (repository root, as root): python reports/cpu/sshfs_tp1.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))

from conftest import sshfs_mounted

from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main


def main_() -> None:
    out = Path(sys.argv[1])
    with sshfs_mounted() as m:
        synthesize(m.source / "eagle3", preset="eagle3-draft", shards=64, size=256_000_000, seed=5)
        print(f"mounted over sshfs: {m.how}")
        args = ["run", str(m.mount / "eagle3"), "--tp", "1", "--devices", "cpu", "--cache", "cold"]
        args += ["--faithful-rounds", "3", "--no-probe", "-q", "-o", str(out)]
        print(f"exit {main(args)}")


if __name__ == "__main__":
    main_()
