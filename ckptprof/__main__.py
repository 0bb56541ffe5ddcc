from __future__ import annotations

from ckptprof.cli.main import entry

# Spawned rank processes re-import the main module as __mp_main__: they must not run the CLI again.
if __name__ == "__main__":
    entry()
