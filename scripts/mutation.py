"""Mutation testing of ckptprof's pure core with mutmut (3.x), one module at a time, on one worker.

Usage (from the repository root; mutmut is not a test dependency, install it by hand first)::

    python -m pip install mutmut==3.8.1
    python scripts/mutation.py                      # every module below, one after the other
    python scripts/mutation.py verdict-classify compare      # only these modules
    python scripts/mutation.py --first-sight verdict-wording  # the suite without the test_mutants_* files
    python scripts/mutation.py --resume verdict-remedies   # only the last run's survivors, against today's tests
    python scripts/mutation.py --list               # the modules, their source and their tests

Per module it prints the tool, the tests the mutants are run against, and the score
(killed / generated; a mutant no test reaches counts as survived), then every mutant that was not
killed with ``mutmut show``'s diff, so a survivor can be judged without the cache.

How: mutmut reads its settings from ``[tool.mutmut]`` in the working directory's pyproject.toml
and keeps its cache in ``mutants/`` there, so each module runs in a scratch copy of the repository
under ``.mutation/<module>/`` (ignored by git) with a pyproject of its own: the module's file is the
only one mutated, and only the module's own unit tests run against it. That keeps a run to one
module, one worker (``--max-children 1``: the machine's cores are shared) and a few minutes.

What mutmut does not mutate (see the mutation report, reports/cpu/2026-12-02-mutation/README.md):
module-level code (constants such as ``SKEW_LIMIT``, tables), class bodies outside methods, default
arguments that are not plain literals, and functions with decorators other than ``staticmethod`` /
``classmethod`` (``property`` included). The fixed sample in scripts/mutation_sample.py covers the
constants that matter by hand.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRATCH = REPO / ".mutation"


@dataclass(frozen=True)
class Target:
    source: str
    tests: tuple[str, ...]
    # Mutant-name globs (mutmut's ``module.x_function__mutmut_N`` names) when only part of the file is
    # in scope; empty means the whole file.
    only: tuple[str, ...] = ()
    # Tests left out of the mutant runs: each takes seconds (rendering every report format, loading every
    # session the project ever wrote), and a survivor runs every test that reaches its function, so one such test
    # makes the module's run hours long. They are still in the suite; the report says what they cover.
    deselect: tuple[str, ...] = ()


def _unit(*names: str) -> tuple[str, ...]:
    return tuple(f"tests/unit/{n}.py" for n in names)


# The session file also holds the dataclasses and their (de)serialisation; only its validation is in scope: what
# decodes a document (the field rules themselves are in session_fields.py, a target of their own) plus
# ``Session.load``, which drives them.
_SESSION_VALIDATION = (
    "_extra_unknown_keys",
    "_session_extra",
    "_read_text",
    "validate_session_dict",
    "validate_ceilings",
)

# The boot-log reader's modules that decide what a log says: the log-wide reader (phases), one boot's state (boot),
# what each record does (actions) and the report (boot_report).
_BOOTLOG_MODULES = ("phases", "boot", "actions", "boot_report")

# The verdict is a package of one module per step: one target each (mutmut mutates one file a run), same tests.
_VERDICT_MODULES = ("figures", "completeness", "classify", "wording", "remedies", "compose")
_EVERY_REPORT_FORMAT = (
    "tests/unit/test_verdict.py::test_every_report_format_prints_the_verdict_caveats",
    "tests/unit/test_verdict.py::test_every_report_format_heads_a_tie_as_no_single_bottleneck",
)

TARGETS: dict[str, Target] = {
    **{
        f"verdict-{part}": Target(
            f"ckptprof/analysis/verdict/{part}.py",
            _unit("test_verdict", "test_mutants_verdict"),
            deselect=_EVERY_REPORT_FORMAT,
        )
        for part in _VERDICT_MODULES
    },
    "compare": Target(
        "ckptprof/analysis/compare.py",
        _unit("test_compare", "test_mutants_compare"),
        deselect=("tests/unit/test_compare.py::test_a_real_session_compared_with_itself_has_no_change",),
    ),
    "header": Target("ckptprof/checkpoint/header.py", _unit("test_header", "test_mutants_header")),
    "session": Target(
        "ckptprof/session.py",
        _unit("test_session", "test_mutants_session"),
        deselect=("tests/unit/test_session.py::test_every_session_the_project_wrote_still_loads",),
        only=(
            *(f"ckptprof.session.x_{f}__mutmut_*" for f in _SESSION_VALIDATION),
            "ckptprof.session.xǁSessionǁload__mutmut_*",
        ),
    ),
    # Since the session became typed (pydantic), its field rules (bounds, kinds, the words of a refusal) live here.
    "session-fields": Target(
        "ckptprof/session_fields.py",
        _unit("test_session", "test_mutants_session"),
        deselect=("tests/unit/test_session.py::test_every_session_the_project_wrote_still_loads",),
    ),
    "recorder": Target(
        "ckptprof/loader/recorder.py",
        _unit("test_recorder", "test_mutants_recorder", "test_faithful_hot_path"),
    ),
    "attribution": Target(
        "ckptprof/analysis/attribution.py",
        _unit("test_verdict", "test_mutants_attribution"),
        deselect=_EVERY_REPORT_FORMAT,
    ),
    # The boot-log reader is a pipeline of modules (#38): one target each, the same tests.
    **{
        module.replace("_", "-"): Target(
            f"ckptprof/bootlog/{module}.py", _unit("test_bootlog_phases", "test_mutants_phases")
        )
        for module in _BOOTLOG_MODULES
    },
}


def _pyproject(target: Target, tests: list[str]) -> str:
    deselect = [arg for name in target.deselect for arg in ("--deselect", name)]
    text = (REPO / "pyproject.toml").read_text()
    lines = [
        "",
        "[tool.mutmut]",
        'source_paths = ["ckptprof"]',
        f"only_mutate = [{json.dumps(target.source)}]",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests + deselect)}",
        # Every mutant is a fresh pytest session in a process that holds torch: pytest's unraisable-exception
        # plugin runs gc.collect() five times at each session's end (2 s there, 10x the tests themselves), and
        # pytest-benchmark asks git for the commit; no unit test in scope needs either plugin, nor the cache.
        'pytest_add_cli_args = ["-p", "no:benchmark", "-p", "no:unraisableexception", "-p", "no:cacheprovider", "-q"]',
        # torch is imported by the suite's conftest: fork each mutant from a server that imported it once.
        'process_isolation = "forkserver"',
        "use_git_change_detection = false",
        "",
    ]
    return text + "\n".join(lines)


def _mutmut() -> str:
    exe = Path(sys.executable).with_name("mutmut")
    found = str(exe) if exe.exists() else shutil.which("mutmut")
    if not found:
        sys.exit("mutmut is not installed: python -m pip install mutmut==3.8.1")
    return found


KILLED = ("killed", "timeout")


def _statuses(work: Path, env: dict[str, str], target: Target) -> dict[str, str]:
    """Every mutant of the target's scope and what became of it, from mutmut's cache in ``work``."""
    listing = subprocess.run(
        [_mutmut(), "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout
    status: dict[str, str] = {}
    for line in listing.splitlines():
        key, sep, value = line.strip().rpartition(": ")
        if sep and (not target.only or any(fnmatch.fnmatch(key, g) for g in target.only)):
            status[key] = value
    return status


def run_target(
    name: str, target: Target, first_sight: bool = False, resume: bool = False
) -> dict[str, object]:
    tests = [t for t in target.tests if (REPO / t).exists()]
    # --first-sight: the score of the suite as it was before the mutation work (no test_mutants_* file).
    skip = ("__pycache__", "test_mutants_*") if first_sight else ("__pycache__",)
    if first_sight:
        tests = [t for t in tests if not Path(t).name.startswith("test_mutants_")]
    work = SCRATCH / name
    env = dict(os.environ)
    # mutmut puts its mutants/ copy first on sys.path; a PYTHONPATH naming the checkout would shadow it.
    env.pop("PYTHONPATH", None)
    before: dict[str, str] = {}
    if resume:
        # --resume: only the mutants the last run left alive run again, against today's tests. A killed mutant
        # stays killed: the tests that killed it are still there. (A new test file changes mutmut's test
        # selection, which makes it forget every result; the merge below keeps the kills.)
        if not (work / "mutants").is_dir():
            raise SystemExit(f"{name}: nothing to resume in {work}; run without --resume first")
        saved = work / "status.json"
        before = json.loads(saved.read_text()) if saved.exists() else _statuses(work, env, target)
        shutil.rmtree(work / "tests")
    else:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        shutil.copytree(REPO / "ckptprof", work / "ckptprof", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "tests", work / "tests", ignore=shutil.ignore_patterns(*skip))
    (work / "pyproject.toml").write_text(_pyproject(target, tests))
    names = sorted(k for k, v in before.items() if v not in KILLED) if resume else list(target.only)
    began = time.monotonic()
    run = subprocess.run(
        [_mutmut(), "run", "--max-children", "1", *names],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - began
    (work / "run.log").write_text(run.stdout + run.stderr)
    status = _statuses(work, env, target)
    if resume:
        status = {k: v if v in KILLED else status.get(k, v) for k, v in before.items()}
    # The merged verdicts, for the next --resume (mutmut's own cache forgets the kills it did not re-run).
    (work / "status.json").write_text(json.dumps(status, indent=0, sort_keys=True))
    if not status:
        print(run.stdout[-4000:], run.stderr[-4000:], sep="\n")
        raise SystemExit(f"{name}: mutmut produced no mutants (see {work / 'run.log'})")
    killed = sum(1 for v in status.values() if v in KILLED)
    survivors = sorted(k for k, v in status.items() if v not in KILLED)
    print(f"== {name}: {target.source}")
    print("   tool:  mutmut", _version(), "(--max-children 1)")
    print("   tests:", " ".join(tests), *(f"(less {d.split('::')[1]})" for d in target.deselect))
    print(f"   score: {killed}/{len(status)} killed = {100 * killed / len(status):.1f}%  ({elapsed:.0f} s)")
    shown = _diffs(work, env, target.source, {k: status[k] for k in survivors})
    (work / ("survivors-first-sight.txt" if first_sight else "survivors.txt")).write_text("\n".join(shown))
    print("\n".join(shown))
    return {"module": name, "killed": killed, "total": len(status), "survivors": survivors}


# Run in the scratch directory in one process (``mutmut show`` once per survivor costs a second each): every
# survivor's diff, headed by file:line of its first changed line in the unmutated source.
_DIFFS = """
import json, sys
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
source, status = sys.argv[1], json.loads(sys.argv[2])
lines = Path(source).read_text().splitlines()
for name, state in status.items():
    diff = get_diff_for_mutant(name, path=source)
    changed = [d[1:] for d in diff.splitlines() if d.startswith("-") and not d.startswith("---")]
    function = name.rpartition(".")[2].rpartition("__mutmut_")[0].split("\u01c1")[-1].removeprefix("x_")
    where = "?"
    start = next((i for i, t in enumerate(lines) if t.lstrip().startswith(f"def {function}(")), 0)
    if changed:
        where = next((str(i + 1) for i in range(start, len(lines)) if lines[i] == changed[0]), "?")
    print(f"# {source}:{where} {name} ({state})")
    print(diff)
"""


def _diffs(work: Path, env: dict[str, str], source: str, status: dict[str, str]) -> list[str]:
    if not status:
        return []
    out = subprocess.run(
        [sys.executable, "-c", _DIFFS, source, json.dumps(status)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [out]


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=f"any of {', '.join(TARGETS)}")
    parser.add_argument(
        "--first-sight", action="store_true", help="leave out the tests/unit/test_mutants_*.py files"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="run again only the mutants the last run of the module left alive",
    )
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    args = parser.parse_args()
    if args.list:
        for name, t in TARGETS.items():
            print(f"{name:20} {t.source:42} {' '.join(t.tests)}")
        return
    unknown = sorted(set(args.modules) - set(TARGETS))
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {list(TARGETS)}")
    summary = [run_target(n, TARGETS[n], args.first_sight, args.resume) for n in (args.modules or TARGETS)]
    print("\nmodule                killed/total  score")
    for s in summary:
        killed, total = int(str(s["killed"])), int(str(s["total"]))
        print(f"{s['module']!s:20} {killed:6}/{total:<6} {100 * killed / total:5.1f}%")


if __name__ == "__main__":
    main()
