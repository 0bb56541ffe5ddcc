"""The engine tier's table from measure.sh's sessions: python table.py OUT."""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path


def slowest(session: dict, role: str, key: str) -> float:
    return max(m[key] for r in session["ranks"] for m in r["models"] if m["role"] == role)


def round_walls(session: dict, role: str) -> float:
    """The median over faithful rounds of the slowest rank's wall for the model."""
    per_rank = [m["faithful_walls"] for r in session["ranks"] for m in r["models"] if m["role"] == role]
    return statistics.median(max(walls) for walls in zip(*per_rank, strict=True))


def load(out: Path, name: str) -> dict:
    """measure.sh's session, or the compressed copy this folder keeps."""
    plain = out / f"{name}.json"
    if plain.exists():
        return json.loads(plain.read_text())
    with gzip.open(out / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def main(out: Path) -> None:
    print(
        "| release | import s (ranks) | cold faithful s (target / draft) | cold storage vs checkpoint bytes |"
        " warm faithful, own iterator s (median of 3) | warm faithful, replica s (median of 3) | own - replica |"
    )
    print("|---|---|---|---|---|---|---|")
    for tag in ("sglang-0.5.23", "sglang-0.5.9", "vllm-0.33.0", "vllm-0.11.0"):
        cold, warm, replica = (load(out, f"{tag}-{kind}") for kind in ("cold", "warm", "replica"))
        imports = ", ".join(f"{r['engine_import_s']:.1f}" for r in cold["ranks"])
        storage = []
        for info in cold["models"]:
            fetched = sum(
                m["faithful_storage_bytes"]
                for r in cold["ranks"]
                for m in r["models"]
                if m["role"] == info["role"]
            )
            storage.append(f"{info['role']} {100 * (fetched / info['total_bytes'] - 1):+.2f}%")
        cells = []
        for role in ("target", "draft"):
            own, rep = round_walls(warm, role), round_walls(replica, role)
            cells.append((own, rep))
        print(
            f"| {tag} | {imports} | {slowest(cold, 'target', 'faithful_wall_s'):.3f} / "
            f"{slowest(cold, 'draft', 'faithful_wall_s'):.3f} | {'; '.join(storage)} | "
            f"{cells[0][0]:.3f} / {cells[1][0]:.3f} | {cells[0][1]:.3f} / {cells[1][1]:.3f} | "
            f"{1000 * (cells[0][0] - cells[0][1]):+.0f} / {1000 * (cells[1][0] - cells[1][1]):+.0f} ms |"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
