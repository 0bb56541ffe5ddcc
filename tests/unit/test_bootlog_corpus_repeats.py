"""The benchmark's file repeats the real-log corpus (benchmarks/bench_bootlog_real.py). The reader's caches must earn
their keep from what a log repeats (ranks printing one line each, a serving loop), never from the file's repetition:
the second copy of the corpus must cost the reader as many full readings of a message as the first. A cache large
enough to remember a whole copy (4,096 shapes a table, 2026-12-06) read the second copy almost free, and a benchmark
of it measured the repetition, not the reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof import bootlog
from ckptprof.bootlog import bars, failures, parse, phases, reading, timestamps
from ckptprof.bootlog.parse import iter_blocks
from ckptprof.bootlog.phases import BootLogAnalyzer

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


def real_corpus() -> bytes:
    """The corpus as the benchmark's file holds it (bench_bootlog_real.real_corpus)."""
    return b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in sorted(REAL.glob("*.log")))


@pytest.mark.skipif(
    bootlog.COMPILED, reason="counts calls by patching the modules, which compiled code calls directly"
)
def test_the_second_copy_of_the_corpus_costs_what_the_first_did(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN the corpus twice in one file, and the reader's module-wide caches empty
    corpus = real_corpus()
    path = tmp_path / "twice.log"
    path.write_bytes(corpus + corpus)
    reading._SHAPES.clear()
    failures._hits_by_table.clear()
    parse._WORKER_TAGS.clear()
    memos = {
        "timestamp_seconds": timestamps.timestamp_seconds,
        "worker_rank_label": parse.worker_rank_label,
        "bar_kind": bars.bar_kind,
    }
    for memo in memos.values():
        memo.cache_clear()
    # WHEN one analyzer reads it, counting by copy the messages it reads whole, those its readings cache missed, the
    # worker tags it reads by their pattern, and the misses of the memos on stamps, process names and bars
    copy = [0]
    whole = [0, 0]
    missed = [0, 0]
    read_whole, read_missed = reading._read_message, phases.read_message

    def counted_whole(message: str, engines: tuple[object, ...]) -> reading.Reading:
        whole[copy[0]] += 1
        return read_whole(message, engines)  # type: ignore[arg-type]

    def counted_missed(message: str, engines: tuple[object, ...]) -> reading.Reading:
        missed[copy[0]] += 1
        return read_missed(message, engines)  # type: ignore[arg-type]

    tags = [0, 0]  # worker tags read by their pattern, not found again in parse's dictionary
    tag_pattern = parse._WORKER_PREFIX_RE

    class CountedTags:
        def match(self, text: str) -> object:
            tags[copy[0]] += 1
            return tag_pattern.match(text)

    monkeypatch.setattr(reading, "_read_message", counted_whole)
    monkeypatch.setattr(phases, "read_message", counted_missed)
    monkeypatch.setattr(parse, "_WORKER_PREFIX_RE", CountedTags())
    memo_misses: dict[str, list[int]] = {name: [] for name in memos}
    analyzer = BootLogAnalyzer()
    fed = 0
    with path.open("rb") as stream:
        for block in iter_blocks(stream):
            if copy[0] == 0 and fed + len(block) > len(corpus):
                # The block that holds the copies' seam is read in two, at the seam (the corpus ends a line): each copy
                # is counted whole, whatever the corpus's size in blocks.
                seam = len(corpus) - fed
                if seam:
                    analyzer.feed_block(block[:seam])
                block, fed = block[seam:], len(corpus)
                copy[0] = 1
                for name, memo in memos.items():
                    memo_misses[name].append(memo.cache_info().misses)
            analyzer.feed_block(block)
            fed += len(block)
    for name, memo in memos.items():
        first = memo_misses[name][0]
        memo_misses[name].append(memo.cache_info().misses - first)
    # THEN the second copy is read about as often as the first: whole readings, readings-cache misses, worker tags, and each memo's misses
    assert min(whole) > 1_000 and min(missed) > 1_000 and min(tags) > 100
    assert whole[1] > 0.9 * whole[0] and missed[1] > 0.9 * missed[0], (whole, missed)
    assert tags[1] > 0.9 * tags[0], tags
    for name, (first, second) in memo_misses.items():
        assert first > 100 and second > 0.9 * first, (name, first, second)
