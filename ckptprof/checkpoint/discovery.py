"""Finding a checkpoint's shard files the way SGLang's ``_prepare_weights`` does.

Pattern order: ``*.safetensors``, then ``*.bin``, then ``*.pt``; the first that matches wins. If
``model.safetensors.index.json`` exists, only files its ``weight_map`` names are kept. File order: sorted (the
newer SGLang default), raw glob order (older releases without ``SGLANG_SORT_WEIGHT_FILES``) or natural sort
(vLLM).

Only regular files are ever opened: a FIFO, socket or device named like a shard or like the index is refused by
its ``stat`` (``open()`` on a FIFO would block forever), and the index is read with a size cap and a parser that
cannot be driven into a RecursionError traceback.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.checkpoint.header import open_regular, special_file_problem
from ckptprof.errors import CheckpointError, os_problem

PATTERNS = ("*.safetensors", "*.bin", "*.pt")
INDEX_NAME = "model.safetensors.index.json"
ORDERS = ("sorted", "glob", "natural")
# A real index is a few MB (one line per tensor: DeepSeek-V3's 91k tensors make ~9 MB); beyond this it is not
# read, so a hostile or corrupt one cannot take the memory of a multi-GB JSON parse.
MAX_INDEX_BYTES = 100_000_000
# Files that match *.bin but are never weights (SGLang and vLLM skip these too).
_NOT_WEIGHTS = {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}


@dataclass
class Checkpoint:
    path: Path
    format: str  # safetensors | bin | pt
    files: list[Path]
    index_path: Path | None = None
    weight_map: dict[str, str] = field(default_factory=dict)
    # Index consistency found at discovery (headers are not read here).
    missing_from_disk: list[str] = field(default_factory=list)  # named by the index, absent
    not_in_index: list[str] = field(default_factory=list)  # on disk, ignored because the index skips them
    problems: list[str] = field(default_factory=list)  # files matched but unusable (directories, loops)

    @property
    def total_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)

    def missing_reason(self) -> str:
        """Why a shard in ``missing_from_disk`` is an error: the same words for `inspect` and `run`."""
        index = self.index_path.name if self.index_path is not None else "the index"
        return f"named by {index} but missing"


def natural_key(name: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def order_files(files: list[Path], order: str) -> list[Path]:
    if order == "sorted":
        return sorted(files, key=lambda p: str(p))
    if order == "natural":
        return sorted(files, key=lambda p: natural_key(p.name))
    if order == "glob":
        return list(files)
    raise ValueError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}")


def discover(path: str | Path, order: str = "sorted") -> Checkpoint:
    """Find the weight files of a checkpoint directory (or a single safetensors file)."""
    root = Path(path)
    try:
        st = root.stat()
    except OSError as exc:  # ELOOP for symlink loops, ENAMETOOLONG, ...
        raise CheckpointError(root, os_problem(exc, directory_too=True, verb="access")) from None
    if not _is_dir(st.st_mode):
        if root.suffix in (".safetensors", ".bin", ".pt"):
            problem = special_file_problem(st.st_mode)
            if problem:
                raise CheckpointError(root, problem)
            return Checkpoint(path=root.parent, format=root.suffix.lstrip("."), files=[root])
        raise CheckpointError(root, "not a checkpoint directory or a .safetensors file")
    if not os.access(root, os.R_OK | os.X_OK):
        raise CheckpointError(root, "permission denied (cannot list the directory)")

    for pattern in PATTERNS:
        # glob.glob returns the directory's own listing order: what older SGLang releases used unsorted.
        matched = [Path(p) for p in glob.glob(os.path.join(glob.escape(str(root)), pattern))]
        matched = [p for p in matched if p.name not in _NOT_WEIGHTS]
        if matched:
            break
    else:
        raise CheckpointError(root, "no *.safetensors, *.bin or *.pt weight files in this directory")

    fmt = pattern.removeprefix("*.")
    ckpt = Checkpoint(path=root, format=fmt, files=[])
    usable = []
    for p in matched:
        problem = _file_problem(p)
        if problem:
            ckpt.problems.append(f"{p}: {problem}")
        else:
            usable.append(p)

    index = root / INDEX_NAME
    if fmt == "safetensors" and index.exists():
        ckpt.index_path = index
        ckpt.weight_map = read_index(index)
        named = set(ckpt.weight_map.values())
        on_disk = {p.name for p in matched}
        ckpt.missing_from_disk = sorted(named - on_disk)
        ckpt.not_in_index = sorted(on_disk - named)
        usable = [p for p in usable if p.name in named]

    if not usable:
        detail = "; ".join(ckpt.problems) if ckpt.problems else "the index names none of the files present"
        raise CheckpointError(root, f"no usable {pattern} files ({detail})")
    ckpt.files = order_files(usable, order)
    return ckpt


def read_index(index: Path) -> dict[str, str]:
    """The index's ``weight_map``. A special file, an index over MAX_INDEX_BYTES, or JSON that is not a valid
    index (nested too deeply for the parser included) is one CheckpointError naming the file."""
    too_large = (
        f"index larger than the {MAX_INDEX_BYTES}-byte cap (corrupt or hostile; a real one is a few MB)"
    )
    try:
        with os.fdopen(open_regular(index), "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_INDEX_BYTES:
                raise CheckpointError(index, too_large)
            raw = fh.read(MAX_INDEX_BYTES + 1)
        if len(raw) > MAX_INDEX_BYTES:  # grew since fstat
            raise CheckpointError(index, too_large)
        doc = json.loads(raw.decode("utf-8"))
    except CheckpointError:
        raise
    except RecursionError:
        raise CheckpointError(index, "malformed index: JSON nested too deeply to parse") from None
    # UnicodeDecodeError, json.JSONDecodeError and int's digit limit are ValueErrors.
    except (OSError, ValueError) as exc:
        raise CheckpointError(index, f"malformed index ({type(exc).__name__}: {exc})") from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise CheckpointError(index, "malformed index: 'weight_map' must map tensor names to file names")
    for name, file in weight_map.items():
        if "/" in file or file in ("", ".", ".."):
            raise CheckpointError(
                index, f"malformed index: tensor {name!r} points outside the directory ({file!r})"
            )
    return dict(weight_map)


def _is_dir(mode: int) -> bool:
    import stat

    return stat.S_ISDIR(mode)


def _file_problem(p: Path) -> str | None:
    try:
        st = p.stat()
    except OSError as exc:
        return f"cannot access ({exc.strerror or exc})"
    if _is_dir(st.st_mode):
        return "is a directory"
    problem = special_file_problem(st.st_mode)
    if problem:  # a FIFO, socket or device: never opened (a FIFO would block the reader forever)
        return problem
    if not os.access(p, os.R_OK):
        return "permission denied"
    return None
