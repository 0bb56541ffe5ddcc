"""The boot-log reader compiled with mypyc (``CKPTPROF_COMPILE=1``, setup.py) is the one a compiled install imports.

CI builds that wheel and runs the boot-log tests against it with ``CKPTPROF_EXPECT_COMPILED=1``; in the plain run
the modules are the sources themselves.
"""

from __future__ import annotations

import os

import ckptprof.bootlog as bootlog
from ckptprof.bootlog import actions, boot, parse, phases, reading, timestamps
from ckptprof.engines import log_rules


def test_the_reader_is_compiled_exactly_when_the_build_was() -> None:
    expected = os.environ.get("CKPTPROF_EXPECT_COMPILED") == "1"
    assert bootlog.COMPILED is expected
    # Every stage a record goes through, the engines' rule classes included (setup.py's COMPILED_MODULES).
    for module in (phases, parse, timestamps, reading, boot, actions, log_rules):
        assert module.__file__ is not None
        assert module.__file__.endswith(".py") is not expected, module.__file__
