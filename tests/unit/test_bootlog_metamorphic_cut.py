"""Every log of the real corpus cut down to an excerpt, or followed by another boot, reads as the original where the
original's evidence is still there (#33 item 5; the decorations are in test_bootlog_metamorphic.py).

Cut: the first and last 20% of the lines dropped, as a paste of the middle of a long log is. The rule for what is
fair to ask of the excerpt:

- framework: the excerpt's is the original's or "unknown" (its evidence may have been only in the cut part), never
  the other engine; and the original's when a phase of the original lies wholly inside the excerpt (the engine's own
  phase words are then still there);
- phases: every phase of the original that begins after the last timestamp of the dropped head and ends before the
  first timestamp of the dropped tail (strictly, so a phase sharing a second with a cut line is not compared) is in
  the excerpt's reading with the same name, model, rank count and seconds. A phase that straddles a cut, or has no
  timestamps to place it by, is not compared: what the excerpt shows of it is an open or partial phase.

Concatenated: a log followed by another boot's log that holds the server's start (a server restarted into the same
file) reads as the boots of the first and then the boots of the second, each boot with the answer its log gave
alone (framework and phases: name, model, rank count, seconds). Mixing two servers' lines
record by record is not asked: nothing in such a stream says which server a line came from, so no reader could
split it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.bootlog import BootReport, analyze_bytes
from ckptprof.bootlog.parse import utf8_bytes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log"))
CUT = 0.2

# Logs whose excerpt or concatenation the reader does not yet read as the rule above asks; strict, so a fix flips
# them and they must come off the list. One line each: why.
CUT_WRONG: dict[str, str] = {
    "vllm-specdecoding-study-eagle3-eager-ready": (
        "batch 23: the draft's load began in the cut head (its bar's first frame, after the target's load), and its "
        "start, computed from its stated 0.69 s, falls after the cut: the excerpt holds one load and nothing that says "
        "it is the draft's, so the rule asks what no reader of the excerpt could know"
    ),
}
# Where the next server's launcher stamps lines before that server's configuration, those lines are read as the
# untimed log's boot, and so is their time (the boundary between the two servers is taken at the configuration).
_LAUNCHER_STAMPS = (
    "batch 9: a log with no time of its own, then a server whose launcher stamps lines before its configuration: "
    "those lines, and their time, are read as the first log's boot"
)
CONCAT_WRONG: dict[str, str] = {
    "sglang-docs-cn-native-api-warning": (
        "batch 25: a log with no boot record at all (its state is starting), then a server's start: after no progress "
        "a configuration is no restart, so the two read as one boot"
    ),
    "sglang-sglang-5096-llama31-70b-tp8-gcp-logging-reversed-tp1-exception": (
        "batch 52: a paste whose lines run newest first, then a log written oldest first, in one file: which way a log "
        "runs is judged once, from its first block, where the second log's stamps outvote the paste's, so the paste is "
        "read as written (newest_first.py)"
    ),
    "sglang-17499-musa-dp2-tp2-import-errors-starting": (
        "batch 54: as batch 25's, a log with no boot record (four ranks' import warnings in SGLang's prefix, state "
        "starting), then a vLLM server's start: no configuration was logged before it, so the two read as one boot"
    ),
    "sglang-23386-dgx-spark-gb10-nemotron-nvfp4-starting": (
        "batch 58: as batches 25 and 54, a log with no boot record (torch's warning and one SGLang warning, state "
        "starting), then a vLLM server's start: a boot with nothing of a start is no server start of the file's"
    ),
}


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _phase_key(report: BootReport) -> list[tuple[str, str | None, int, float | None]]:
    return [(p.name, p.model, p.ranks, p.seconds) for p in report.phases]


def _all_boots(data: bytes) -> list[BootReport]:
    last = analyze_bytes(data)
    return [analyze_bytes(data, boot=n) for n in range(1, last.boots)] + [last]


def _params(wrong: dict[str, str]) -> list[object]:
    return [
        pytest.param(log, marks=pytest.mark.xfail(strict=True, reason=wrong[log.stem]), id=log.stem)
        if log.stem in wrong
        else pytest.param(log, id=log.stem)
        for log in LOGS
    ]


@pytest.mark.parametrize("log", _params(CUT_WRONG))
def test_an_excerpt_of_a_real_log_keeps_the_phases_inside_it(log: Path) -> None:
    lines = _lines(utf8_bytes(log.read_bytes()))  # a UTF-16 log's text, cut at its own lines
    head, tail = int(len(lines) * CUT), len(lines) - int(len(lines) * CUT)
    excerpt = b"\n".join(lines[head:tail])
    # Where the excerpt begins and ends in the log's own time, as the reader stamps the dropped parts.
    after = analyze_bytes(b"\n".join(lines[:head])).last_timestamp if head else None
    before = analyze_bytes(b"\n".join(lines[tail:])).first_timestamp if tail < len(lines) else None
    opening = next((line for line in lines[tail:] if line.strip()), None)
    if opening is not None and analyze_bytes(opening).first_timestamp is None:
        # A tail that opens with lines of no time of their own (uvicorn's after the engine's last record, a
        # collector's time stripped with its prefix) happened at the time of the last timed line before it: that is
        # where the reader stamps them in the whole log, and one of them may end a phase there (the ready line).
        before = analyze_bytes(b"\n".join(lines[:tail])).last_timestamp or before
    original = _all_boots(utf8_bytes(log.read_bytes()))
    inside = [
        (p.name, p.model, p.ranks, p.seconds)
        for report in original
        for p in report.phases
        if p.start is not None
        and p.end is not None
        and (after is None or p.start > after)
        and (before is None or p.end < before)
    ]
    cut = _all_boots(excerpt)
    got = [key for report in cut for key in _phase_key(report)]
    assert [key for key in inside if key not in got] == []
    frameworks = {report.framework for report in cut}
    assert frameworks <= {original[-1].framework, "unknown"}, frameworks
    if inside:
        assert original[-1].framework in frameworks


# A server's start as the engines print it (SGLang's ServerArgs, vLLM's API server banner): the only thing in a
# stream that says a new server began. A log pasted from the middle of a boot has none, and appended to another
# boot it is rightly read as more of that boot, so the second boot is always a log that holds its start.
STARTS = (b"ServerArgs(", b"API server version")


def _opens_with_its_start(data: bytes) -> bool:
    """Whether the log holds a server's start with no timed line before it. A launcher that stamps lines before the
    server's configuration (vLLM's platform line in SGLang's process, a ROCm image's JIT builds) makes the known-wrong
    case pinned below (_LAUNCHER_STAMPS); as a partner chosen by the corpus's order it would turn that one case into
    a failure of every log it follows."""
    at = min((found for start in STARTS if (found := data.find(start)) >= 0), default=-1)
    return at >= 0 and analyze_bytes(data[: data.rfind(b"\n", 0, at) + 1]).first_timestamp is None


STARTED = [log for log in LOGS if _opens_with_its_start(utf8_bytes(log.read_bytes()))]


def _partner(log: Path) -> Path:
    """The next log of the corpus that holds a server's start, from the other engine where one is left: a
    different run, mostly of a different engine."""
    engine = log.stem.split("-")[0]
    others = [other for other in STARTED if other != log]
    return next((other for other in others if other > log and other.stem.split("-")[0] != engine), others[0])


def _reading(report: BootReport) -> tuple[object, ...]:
    failure = report.failure
    where = (failure.rank, failure.phase, failure.model) if failure else None
    # the state and the failure too: the next server's records must not end this boot's crash or rename its error; nor
    # its configuration name this boot's model
    return (report.framework, _phase_key(report), report.state, where, report.error, report.model_name)


@pytest.mark.parametrize("log", _params(CONCAT_WRONG))
def test_a_real_log_followed_by_another_boot_reads_as_two(log: Path) -> None:
    _reads_as_two(log, _partner(log))


# The known-wrong case above, pinned to the partner that shows it: which log is a log's partner changes as the corpus
# grows (batch 27's logs gave these three a partner with no launcher stamps, and they read right with it).
LAUNCHER_STAMPED = REAL / "sglang-dgx-spark-local-llm-dflash-int4.log"


@pytest.mark.xfail(strict=True, reason=_LAUNCHER_STAMPS)
@pytest.mark.parametrize("name", ["vllm-gpustack-3098", "vllm-vllm-10661", "vllm-hf-llama31-bnb-keyerror"])
def test_an_untimed_log_before_a_server_whose_launcher_stamps_lines_reads_as_two(name: str) -> None:
    _reads_as_two(REAL / f"{name}.log", LAUNCHER_STAMPED)


def _reads_as_two(log: Path, partner: Path) -> None:
    first, second = utf8_bytes(log.read_bytes()), utf8_bytes(partner.read_bytes())  # two logs' texts, joined
    alone = _all_boots(first) + _all_boots(second)
    joined = first if first.endswith(b"\n") else first + b"\n"
    together = _all_boots(joined + second)
    assert len(together) == len(alone)
    assert [_reading(report) for report in together] == [_reading(report) for report in alone]
