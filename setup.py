"""Optional: compile the boot-log reader with mypyc (``CKPTPROF_COMPILE=1``); everything else is in pyproject.toml.

``ckptprof log`` spends its time in Python code run once per log record; compiled, the same modules read a
real-log corpus about 1.35 times faster (reports/cpu/2026-12-01-bootlog-compiled). A plain install stays pure
Python: compiling needs mypy and a C compiler, and takes a minute or two.

    CKPTPROF_COMPILE=1 pip install --no-build-isolation .        # mypy installed first (the [test] extra)

Not for editable installs: the compiled modules would sit beside the sources and shadow every later edit.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

# The modules each log record goes through; the engine tables, the report and its words stay interpreted.
COMPILED_MODULES = [
    f"ckptprof/bootlog/{name}.py"
    for name in (
        "parse",
        "timestamps",
        "prefilter",
        "reading",
        "phases",
        "clock",
        "boot",
        "actions",
        "bar_tracks",
        "failures",
        "wrappers",
        "state",
        "bars",
    )
] + ["ckptprof/engines/log_rules.py"]  # the rules' classes, read on every record


# The commands that build the extensions; setuptools also runs this file for metadata (egg_info, dist_info), where
# mypyc would type-check and generate the C code for nothing (1.5 minutes each time).
BUILD_COMMANDS = {"bdist_wheel", "build", "build_ext", "install", "develop", "editable_wheel"}


def extensions() -> list[object]:
    if os.environ.get("CKPTPROF_COMPILE", "") not in ("1", "true", "yes"):
        return []
    if not BUILD_COMMANDS.intersection(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit(
            "CKPTPROF_COMPILE=1 needs mypy (pip install mypy) and --no-build-isolation so the build can see it"
        ) from exc
    return list(mypycify(COMPILED_MODULES, opt_level="3"))


setup(ext_modules=extensions())
