"""The host a session was measured on: the versions, the CPU count, the memory, the CUDA devices."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any


def environment() -> dict[str, Any]:
    """What a reader needs to know about where the figures come from (saved as the session's environment)."""
    import safetensors
    import torch

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "cuda_available": torch.cuda.is_available(),
        # How the decomposed pass faults pages in before timing the copy (ckptprof.loader.touch).
        "fault_in": os.environ.get("CKPTPROF_FAULT_IN", "populate") or "populate",
    }
    try:
        import psutil

        env["memory_bytes"] = psutil.virtual_memory().total
    except Exception:  # pragma: no cover - psutil is a dependency; keep the session even if it misbehaves
        pass
    if torch.cuda.is_available():
        env["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        env["cuda_version"] = torch.version.cuda
    return env
