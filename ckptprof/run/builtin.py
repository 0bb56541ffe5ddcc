"""The built-in demo checkpoint: a synthetic EAGLE-3 draft, generated once into the user's cache folder."""

from __future__ import annotations

import sys
from pathlib import Path

from ckptprof.cachedir import cache_dir
from ckptprof.errors import UsageError


def builtin_checkpoint(size: int, shards: int = 64, quiet: bool = False) -> Path:
    """The built-in demo checkpoint of ``size`` bytes in ``shards`` files, generated on first use."""
    from ckptprof.checkpoint.synth import synthesize

    path = cache_dir() / f"eagle3-draft-{shards}x{size}"
    marker = path / ".complete"
    if not marker.exists():
        if not quiet:
            print(f"generating the built-in synthetic checkpoint in {path} (once) ...", file=sys.stderr)
        try:
            synthesize(path, preset="eagle3-draft", shards=shards, size=size, force=True)
            marker.write_text("ok\n")
        except OSError as exc:
            raise UsageError(
                f"{path}: cannot write the built-in checkpoint there ({exc.strerror or exc}); "
                "set CKPTPROF_CACHE to a writable folder, or give a checkpoint directory"
            ) from None
    return path
