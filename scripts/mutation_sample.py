"""CI's mutation check: a fixed sample of mutants of the pure core, each of which the unit tests must kill.

Usage (from the repository root; .ci/run calls it after the test suite)::

    python scripts/mutation_sample.py            # every sample mutant; exit 1 if one survives
    python scripts/mutation_sample.py -k verdict # only the mutants of one module (or whose text matches)

The full mutation run (scripts/mutation.py, mutmut) takes tens of minutes a module; this takes a few minutes on
two cores and cannot fall silently: a mutant that survives, a mutant whose source text is no longer found
exactly once (the code moved on: update the sample), a module whose own tests fail unmutated, or a run that tries
no mutant at all each make it exit non-zero.

Each mutant is a plain text substitution (``before`` -> ``after``) in one file, matched on the source's text, not
on a line number, so it survives code moving around it. The tests run against a scratch copy of ``ckptprof/`` and
``tests/``: the heavy third-party imports (torch, numpy, pytest) are made once here and every mutant's pytest
session runs in a forked child that imports ckptprof afresh from the mutated copy, stops at the first failure
(``-x``), and counts as killed when a test fails. The modules, their tests and the slow tests left out are
scripts/mutation.py's (TARGETS). The sample picks mutants of every kind the full run found survivors of, and the
constants mutmut cannot mutate (module-level code); see reports/cpu/2026-12-02-mutation/README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation import REPO, TARGETS  # a sibling script, not a package

# A mutant whose tests are still running after this long is reported as a timeout (killed, but look at it: the
# sample should hold mutants the tests catch by an assertion).
TIMEOUT_S = 120


@dataclass(frozen=True)
class Mutant:
    module: str  # a key of scripts/mutation.py's TARGETS: the source file and its tests
    before: str  # source text that must occur exactly once in the file
    after: str

    def label(self) -> str:
        return f"{self.module}: {self.before.strip()!r} -> {self.after.strip()!r}"


# The fixed sample: ~5 a module, across operators (comparisons, arithmetic, constants, booleans, dropped calls).
SAMPLE: tuple[Mutant, ...] = (
    # verdict: the constants an earlier audit found unchecked, then mutmut's kinds of survivors
    Mutant("verdict-classify", "CLOSE_SHARE = 0.10", "CLOSE_SHARE = 0.05"),
    Mutant("verdict-classify", "SKEW_LIMIT = 1.5", "SKEW_LIMIT = 2.0"),
    Mutant("verdict-wording", "ABOVE_CEILING = 1.05", "ABOVE_CEILING = 2.0"),
    Mutant("verdict-remedies", "WHOLE_FILE_DESERIALIZE_PASSES = 2", "WHOLE_FILE_DESERIALIZE_PASSES = 1"),
    Mutant(
        "verdict-figures",
        "return max(0.0, min(1.0, missing / total))",
        "return max(0.0, min(2.0, missing / total))",
    ),
    Mutant(
        "verdict-wording",
        "if amplification is not None and amplification > 1.5",
        "if amplification is not None and amplification >= 1.5",
    ),
    Mutant("verdict-figures", "missing / ckpt,", "missing / ckpt / 2,"),
    Mutant(
        "verdict-wording",
        'how, via = ("mmap page faults", "through faults")',
        'how, via = ("mmap page faults", "via faults")',
    ),
    Mutant(
        "verdict-wording",
        "if fdelta is not None and fdelta > 0.05:",
        "if fdelta is not None and fdelta >= 0.0:",
    ),
    Mutant(
        "verdict-completeness",
        "        done = ok if done is None else done & ok",
        "        done = ok if done is None else done | ok",
    ),
    Mutant(
        "verdict-completeness",
        "reason = f\" ({(first.error or 'no reason given').splitlines()[0][:160]})\"",
        "reason = f\" ({(first.error or 'no reason given').splitlines()[0][:161]})\"",
    ),
    Mutant("verdict-remedies", "    return min(alone, together / ranks)", "    return min(alone, together)"),
    # compare: the gate (+0.5 points of slack went unnoticed once) and the words of a difference
    Mutant(
        "compare",
        "return pct is not None and pct > fail_above_pct",
        "return pct is not None and pct > fail_above_pct + 0.5",
    ),
    Mutant(
        "compare",
        "return pct is not None and pct > fail_above_pct",
        "return pct is not None and pct >= fail_above_pct",
    ),
    Mutant(
        "compare",
        '+ (f" and {len(rest) - 1} more" if rest[1:] else "")',
        '+ (f" and {len(rest)} more" if rest[1:] else "")',
    ),
    Mutant("compare", "    if hosts[0] != hosts[1]:", "    if False:"),
    Mutant("compare", "            if m.role not in roles:", "            if m.role in roles:"),
    Mutant("compare", 'return f"{name} is {value}"', "return None"),
    # header: the caps (both reads of the length), the 64-bit limits, the layout
    Mutant(
        "header",
        "            if header_len > MAX_HEADER_BYTES:",
        "            if header_len >= MAX_HEADER_BYTES:",
    ),
    Mutant(
        "header",
        "            if header_len > MAX_HEADER_BYTES:",
        "            if header_len > 2 * MAX_HEADER_BYTES:",
    ),
    Mutant(
        "header",
        "    header_len = len(raw)\n    if header_len > MAX_HEADER_BYTES:",
        "    header_len = len(raw)\n    if False:",
    ),
    Mutant(
        "header",
        "    header_len = len(raw)\n    if header_len > MAX_HEADER_BYTES:",
        "    header_len = len(raw)\n    if header_len >= MAX_HEADER_BYTES:",
    ),
    Mutant("header", "        if numel > _USIZE_MAX:", "        if numel >= _USIZE_MAX:"),
    Mutant("header", "    if bits > _USIZE_MAX:", "    if bits > 2 * _USIZE_MAX:"),
    Mutant("header", "and 2 + _depth(value) > MAX_HEADER_DEPTH", "and 1 + _depth(value) > MAX_HEADER_DEPTH"),
    Mutant("header", "        if entry.begin > cursor:", "        if entry.begin > cursor + 1:"),
    Mutant("header", '    return float(text) if text.startswith("-") else int(text)', "    return int(text)"),
    # session validation (session_fields.py since the session is typed; the inflate bound in session.py): the bounds
    # of counts and seconds, what a value is described as, rank keys, where a NaN is
    Mutant("session-fields", "MAX_SECONDS = 1e9", "MAX_SECONDS = 1e15"),
    Mutant("session-fields", "MIN_SECONDS = 1e-12", "MIN_SECONDS = 1e-15"),
    Mutant("session-fields", "at.Le(MAX_COUNT), COUNT]", "at.Le(MAX_COUNT + 1), COUNT]"),
    Mutant(
        "session-fields",
        'text = value if len(value) <= 40 else value[:37] + "..."',
        'text = value if len(value) <= 41 else value[:37] + "..."',
    ),
    Mutant("session", "    if len(data) > MAX_INFLATED_BYTES:", "    if len(data) >= MAX_INFLATED_BYTES:"),
    Mutant("session-fields", "at.Predicate(str.isdigit), RANK_KEY]", "at.Predicate(len), RANK_KEY]"),
    Mutant(
        "session-fields",
        '            check_finite(v, f"{where}[{i}]")',
        '            check_finite(v, f"{where}[{i + 1}]")',
    ),
    # recorder: the counter baselines (a dropped storage baseline went unnoticed once), spans, settling
    Mutant(
        "recorder",
        "timing.storage_bytes += max(0, counts[1] - state.storage0)",
        "timing.storage_bytes += max(0, counts[1])",
    ),
    Mutant(
        "recorder", "timing.major_faults += counts[0] - state.faults0", "timing.major_faults += counts[0]"
    ),
    Mutant(
        "recorder",
        "state.timing.storage_bytes += max(0, c1[1] - c0[1])",
        "state.timing.storage_bytes += c1[1] - c0[1]",
    ),
    Mutant("recorder", "state.last = t1 if state.last is None else max(state.last, t1)", "state.last = t1"),
    Mutant(
        "recorder",
        "residual = (self.process_storage_bytes() - since) - sum(",
        "residual = self.process_storage_bytes() - sum(",
    ),
    Mutant(
        "recorder",
        "counted = process or (state.owner != me and me not in state.users)",
        "counted = process or state.owner != me",
    ),
    # the faithful multithreaded pass's whole-shard booking (add_stretched_shard)
    Mutant(
        "recorder",
        "timing.storage_bytes = sum(max(0, stretch[4]) for stretch in stretches)",
        "timing.storage_bytes = sum(stretch[4] for stretch in stretches)",
    ),
    Mutant(
        "recorder",
        "work = union_seconds([(stretch[0], stretch[1]) for stretch in stretches])",
        "work = sum(stretch[1] - stretch[0] for stretch in stretches)",
    ),
    # attribution and the boot-log reader (phases, boot, actions, boot_report): the full run's first-sight scores
    # are lower; these are caught today
    Mutant(
        "attribution",
        "    return max(walls) / median if median > 0 else 1.0",
        "    return max(walls) / min(walls) if median > 0 else 1.0",
    ),
    Mutant(
        "attribution",
        "return min(1.0, max(s.nonresident_bytes, s.storage_bytes) / s.bytes)",
        "return min(1.0, s.nonresident_bytes / s.bytes)",
    ),
    Mutant(
        "attribution",
        "        return max(0.0, self.wall_s - self.read_s - self.deserialize_s - self.h2d_s)",
        "        return max(0.0, self.wall_s - self.read_s - self.deserialize_s)",
    ),
    Mutant("phases", "        if seconds > clock.now_s:", "        if seconds < clock.now_s:"),
    Mutant("boot", "        span.end = record.timestamp", "        span.end = None"),
    Mutant(
        "boot",
        "            return shift_timestamp(stamp, -elapsed_s)",
        "            return shift_timestamp(stamp, elapsed_s)",
    ),
    Mutant("phases", "STALL_AFTER_S = 120.0", "STALL_AFTER_S = 600.0"),
    # the earlier audit's planted bug: a phase with no logged end runs to the log's last line, not to ready
    Mutant(
        "boot-report",
        "    return timestamp_seconds(ready_at) if ready_at else now_s",
        "    return now_s",
    ),
    Mutant(
        "actions",
        '        if not (before.isalnum() or before == "_"):',
        "        if not before.isalnum():",
    ),
    Mutant("phases", "if not 1 <= index <= boots:", "if not 1 < index <= boots:"),
)


def _apply(source: str, mutant: Mutant) -> str:
    count = source.count(mutant.before)
    if count != 1:
        raise SystemExit(
            f"sample mutant no longer matches: {mutant.label()} occurs {count} times in "
            f"{TARGETS[mutant.module].source} (update SAMPLE in {Path(__file__).name})"
        )
    return source.replace(mutant.before, mutant.after)


def _pytest_args(module: str, only_own: bool) -> list[str]:
    target = TARGETS[module]
    tests = [t for t in target.tests if (REPO / t).exists()]
    if only_own:
        tests = [t for t in tests if Path(t).name.startswith("test_mutants_")]
    deselect = [a for d in target.deselect for a in ("--deselect", d)]
    # -x: the first failing test is enough; no benchmark / unraisable-exception plugins (see scripts/mutation.py).
    # --assert=plain: a failing assert still fails; rewriting every test module and ckptprof (pytest rewrites the
    # modules of a package that ships a pytest plugin) in each child cost seconds a mutant.
    plugins = ["-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:unraisableexception"]
    return ["-x", "-q", "--assert=plain", *plugins, *tests, *deselect]


def _run_tests(work: Path, module: str) -> str:
    """The module's tests against the copy in ``work``: 'passed', 'killed', 'timeout' or an error.

    Its test_mutants_* file runs alone first (a session that collects one small file is quick, and that file
    was written to kill these mutants); only a mutant that file does not kill runs the module's other tests."""
    own = any(Path(t).name.startswith("test_mutants_") and (REPO / t).exists() for t in TARGETS[module].tests)
    if own:
        first = _run_pytest(work, _pytest_args(module, only_own=True))
        if first != "passed":
            return first
    return _run_pytest(work, _pytest_args(module, only_own=False))


def _run_pytest(work: Path, args: list[str]) -> str:
    """Run pytest with ``args`` in a forked child against the copy in ``work``: 'passed', 'killed' or 'timeout'."""
    pid = os.fork()
    if pid == 0:  # the child: import ckptprof from the (mutated) copy, run pytest, report its exit code
        try:
            os.chdir(work)
            sys.path.insert(0, str(work))
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest

            code = int(pytest.main([*args, "--rootdir", str(work)]))
        except BaseException:
            code = 99
        os._exit(code)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return "passed"
    if code == 1:  # pytest: some test failed
        return "killed"
    # 2-5: interrupted, internal error, usage error, no tests collected; 99: the child itself broke.
    return f"error (exit {code})"


def _from_diffs(text: str) -> list[tuple[str, Mutant | None]]:
    """The mutants of a survivors.txt (mutmut's per-function diffs) as text substitutions: (name, mutant or None
    where the removed lines are not found exactly once in the source, methods' lines indented one level more)."""
    out: list[tuple[str, Mutant | None]] = []
    by_source = {t.source: name for name, t in TARGETS.items()}
    for block in text.split("\n# ")[0:]:
        lines = block.lstrip("# ").splitlines()
        if not lines or " " not in lines[0]:
            continue
        where, name = lines[0].split()[:2]
        module = by_source[where.split(":")[0]]
        removed = [line[1:] for line in lines[1:] if line.startswith("-") and not line.startswith("---")]
        added = [line[1:] for line in lines[1:] if line.startswith("+") and not line.startswith("+++")]
        source = (REPO / TARGETS[module].source).read_text()
        found = None
        for indent in ("", "    "):
            before = "\n".join(indent + line if line else line for line in removed) + "\n"
            after = "\n".join(indent + line if line else line for line in added) + ("\n" if added else "")
            if removed and source.count("\n" + before) == 1:
                found = Mutant(module, "\n" + before, "\n" + after)
                break
        out.append((name, found))
    return out


def _recheck(path: Path) -> int:
    """Apply each mutant of a survivors.txt to the source text and run its module's tests: mutmut cannot switch a
    mutant on in a function that only runs while the module is imported (a check factory called at module level)."""
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401

    mutants = _from_diffs(path.read_text())
    with tempfile.TemporaryDirectory(prefix="ckptprof-mutation-recheck-") as tmp:
        work = Path(tmp)
        for part in ("ckptprof", "tests"):
            shutil.copytree(REPO / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(REPO / "pyproject.toml", work / "pyproject.toml")
        for module in dict.fromkeys(m.module for _, m in mutants if m is not None):
            if _run_tests(work, module) != "passed":
                print(f"{module}: the unmutated tests did not pass", file=sys.stderr)
                return 1
        sys.dont_write_bytecode = True
        for name, mutant in mutants:
            if mutant is None:
                print(f"unmatched {name}", flush=True)
                continue
            target = work / TARGETS[mutant.module].source
            original = target.read_text()
            for pyc in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
                pyc.unlink()
            target.write_text(original.replace(mutant.before, mutant.after))
            try:
                result = _run_tests(work, mutant.module)
            finally:
                target.write_text(original)
            print(f"{result:8} {name}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-k", default="", help="only the mutants whose label contains this text")
    parser.add_argument(
        "--survivors",
        type=Path,
        help="instead of the sample, re-run the mutants of a survivors.txt that scripts/mutation.py wrote (report only)",
    )
    args = parser.parse_args()
    if args.survivors:
        return _recheck(args.survivors)
    chosen = [m for m in SAMPLE if args.k in m.label()]
    if not chosen:
        print(f"no sample mutant matches {args.k!r}", file=sys.stderr)
        return 1
    # Heavy imports once, before any fork: each child then only imports ckptprof itself (hypothesis alone costs
    # seconds: its pytest plugin imports it at every session's end).
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401

    began = time.monotonic()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ckptprof-mutation-sample-") as tmp:
        work = Path(tmp)
        for part in ("ckptprof", "tests"):
            shutil.copytree(REPO / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(REPO / "pyproject.toml", work / "pyproject.toml")
        originals = {m.module: (work / TARGETS[m.module].source).read_text() for m in chosen}
        # Every mutant's text is checked before anything runs: a stale sample fails in seconds.
        mutated = [(m, _apply(originals[m.module], m)) for m in chosen]
        for module in dict.fromkeys(m.module for m in chosen):
            # Unmutated, the module's tests must pass: else every mutant would look killed.
            result = _run_tests(work, module)
            print(f"{module}: unmutated tests {result}", flush=True)
            if result != "passed":
                failures.append(f"{module}: the unmutated tests did not pass ({result})")
        if failures:
            print("\n".join(failures), file=sys.stderr)
            return 1
        # The children compile the mutated file from its text, never from a .pyc of another version.
        sys.dont_write_bytecode = True
        for mutant, text in mutated:
            path = work / TARGETS[mutant.module].source
            for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                pyc.unlink()
            path.write_text(text)
            try:
                result = _run_tests(work, mutant.module)
            finally:
                path.write_text(originals[mutant.module])
            print(f"{result:8} {mutant.label()}", flush=True)
            if result not in ("killed", "timeout"):
                failures.append(f"{result}: {mutant.label()}")
    elapsed = time.monotonic() - began
    print(f"{len(chosen) - len(failures)} of {len(chosen)} sample mutants killed in {elapsed:.0f} s")
    if failures:
        print("not killed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
