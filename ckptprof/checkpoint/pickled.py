"""Opt-in reading of pickle checkpoints (`*.bin`, `*.pt`), only ever through ``torch.load(weights_only=True)``.

ckptprof never unpickles a checkpoint unless asked (`--allow-pickle`), and even then only with torch's restricted
unpickler, which refuses anything but tensors and plain containers - a hostile file fails with an error instead of
running code. ``mmap=True`` keeps the tensor bytes on disk until they are touched, like safetensors' mmap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckptprof.errors import CheckpointError

PICKLE_SUFFIXES = (".bin", ".pt")


def is_pickle(path: str | Path) -> bool:
    return str(path).endswith(PICKLE_SUFFIXES)


def load_state_dict(path: str | Path) -> dict[str, Any]:
    """``torch.load(weights_only=True)``, memory-mapped where the file format allows it."""
    import pickle

    import torch

    try:
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            # Legacy (non-zip) torch.save files cannot be memory-mapped: read them whole.
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(path, f"refused by torch.load(weights_only=True): {first}") from None
    except (OSError, RuntimeError, EOFError, ValueError) as exc:
        raise CheckpointError(
            path, f"cannot load: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise CheckpointError(path, f"holds a {type(state).__name__}, not a state dict of tensors")
    return {k: v for k, v in state.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}


_SAFETENSORS_NAMES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "int16": "I16",
    "int32": "I32",
    "int64": "I64",
    "float16": "F16",
    "bfloat16": "BF16",
    "float32": "F32",
    "float64": "F64",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}


def tensor_specs(path: str | Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Names, safetensors dtype names and shapes of a pickle checkpoint's tensors (for allocating parameters)."""
    out = {}
    for name, t in load_state_dict(path).items():
        dtype = _SAFETENSORS_NAMES.get(str(t.dtype).removeprefix("torch."))
        if dtype is None:
            raise CheckpointError(path, f"tensor {name!r}: dtype {t.dtype} has no safetensors equivalent")
        out[name] = (dtype, tuple(t.shape))
    return out
