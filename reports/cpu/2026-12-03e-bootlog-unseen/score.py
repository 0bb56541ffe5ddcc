"""Score `ckptprof log` on one batch of the real-log corpus: which logs it reads as a person read them.

    python reports/cpu/2026-12-02b-bootlog-unseen/score.py [BATCH_FILE ...]

A batch file lists log stems (one a line) under tests/fixtures/logs/real/. For each log every key of its
expected answer is compared as tests/unit/test_bootlog_real.py compares it; a log is right when all keys match.
Prints one line per log that is wrong (the keys that differ) and a summary: logs, right, failures by key.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ckptprof.bootlog import BootReport, analyze_path
from ckptprof.bootlog.bars import bar_kind

HERE = Path(__file__).resolve().parent
REAL = HERE.parents[2] / "tests" / "fixtures" / "logs" / "real"


def _pairs(report: BootReport) -> list[list[str | None]]:
    pairs: list[list[str | None]] = []
    for phase in report.phases:
        if [phase.name, phase.model] not in pairs:
            pairs.append([phase.name, phase.model])
    return pairs


def _phase_ranks(report: BootReport) -> dict[str, int]:
    """Each phase's rank count under its `name/model` key, and a phase with no model (init-distributed, ready) under
    its name alone too (the README's spec), as under `name/None`, the form of the earlier answers."""
    ranks: dict[str, int] = {}
    for phase in report.phases:
        ranks[f"{phase.name}/{phase.model}"] = phase.ranks
        if phase.model is None:
            ranks[phase.name] = phase.ranks
    return ranks


def wrong_keys(log: Path) -> dict[str, tuple[Any, Any]]:
    """Each expected key the reader got wrong, with (got, wanted)."""
    expect = json.loads(log.with_suffix(".expected.json").read_text())["expect"]
    report = analyze_path(str(log))
    got: dict[str, Any] = {"framework": report.framework, "state": report.state, "boots": report.boots}
    got["phases"] = _pairs(report)
    ranks = _phase_ranks(report)
    got["phase_ranks"] = {key: ranks.get(key) for key in expect.get("phase_ranks", {})}
    failure = report.failure
    wanted_failure = expect.get("failure", {})
    got_failure = {
        k: (getattr(failure, k) if failure else None)
        for k in ("rank", "phase", "model")
        if k in wanted_failure
    }
    if "error_contains" in wanted_failure:
        got_failure["error_contains"] = (
            wanted_failure["error_contains"]
            if wanted_failure["error_contains"] in (report.error or "")
            else report.error
        )
    got["failure"] = got_failure
    loads = [bar for bar in report.progress if (kind := bar_kind(bar.desc)) and kind.phase == "load-weights"]
    bar = loads[-1] if loads else None
    got["last_bar"] = {"desc": bar.desc, "done": bar.done, "total": bar.total} if bar else None
    got["loader"], got["filesystem"] = report.loader, report.filesystem
    got["throughput_GiBps"] = report.throughput_GiBps and round(report.throughput_GiBps, 3)
    got["summary_contains"] = [text for text in expect.get("summary_contains", []) if text in report.summary]
    got["startup_timings"] = {step: report.startup_timings.get(step) for step in expect.get("startup_timings", {})}
    return {key: (got[key], want) for key, want in expect.items() if got[key] != want}


def main(argv: list[str]) -> int:
    batches = [Path(arg) for arg in argv] or sorted(HERE.glob("batch*.txt"))
    for batch in batches:
        stems = [line.strip() for line in batch.read_text().splitlines() if line.strip()]
        kinds: Counter[str] = Counter()
        right = 0
        for stem in stems:
            wrong = wrong_keys(REAL / f"{stem}.log")
            right += not wrong
            kinds.update(list(wrong))
            for key, (got, want) in wrong.items():
                print(f"  {stem}: {key}: got {got!r}, want {want!r}")
        print(
            json.dumps({"batch": batch.name, "logs": len(stems), "right": right, "wrong_by_key": dict(kinds)})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
