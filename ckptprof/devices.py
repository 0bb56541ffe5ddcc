"""Which devices a run uses: the ``--devices`` grammar (``cpu``, ``cuda``, ``cuda:0-7``, ``0,1``) and its default.

One parser for ``run``, ``probe`` and the API; it sits below every package that takes a device list.
"""

from __future__ import annotations

import re

from ckptprof.errors import UsageError


def parse_devices(spec: str, cuda_count: int | None = None) -> list[str]:
    """'cpu', 'cuda' (all visible), 'cuda:0-7', 'cuda:0,cuda:1', '0,1' -> ['cuda:0', ...]."""
    spec = spec.strip().lower()
    if spec == "cpu":
        return ["cpu"]
    if cuda_count is None:
        cuda_count = visible_cuda()
    if spec in ("cuda", "gpu", "all"):
        if cuda_count == 0:
            raise UsageError("--devices cuda: no CUDA device is visible (use --devices cpu)")
        return [f"cuda:{i}" for i in range(cuda_count)]
    indices: list[int] = []
    for part in spec.removeprefix("cuda:").split(","):
        part = part.strip().removeprefix("cuda:")
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UsageError(f"--devices {spec!r}: expected cpu, cuda, cuda:0-7 or 0,1")
        lo = int(match.group(1))
        hi = int(match.group(2) or lo)
        if hi < lo:
            raise UsageError(f"--devices {spec!r}: range {lo}-{hi} is empty")
        indices.extend(range(lo, hi + 1))
    for i in indices:
        if i >= cuda_count:
            raise UsageError(
                f"--devices {spec!r}: cuda:{i} does not exist ({cuda_count} CUDA devices visible)"
            )
    return [f"cuda:{i}" for i in dict.fromkeys(indices)]


def visible_cuda() -> int:
    """CUDA devices torch sees here (0 without torch's CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def default_device_spec() -> str:
    """What ``--devices`` means when it is not given: every visible GPU, else the CPU."""
    return "cuda" if visible_cuda() else "cpu"
