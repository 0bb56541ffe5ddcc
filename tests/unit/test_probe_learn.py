"""The storage probe is a ceiling (probe/learn.py): a replay that fetched from storage faster than the probe makes
it measure again with other settings, cheapest first, until it holds; what it tried and what it kept are said."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint.fs import drop_tolerance
from ckptprof.probe import learn, storage
from ckptprof.probe.learn import Setting
from ckptprof.probe.sampling import Region
from ckptprof.results import Ceilings, Verdict
from ckptprof.session import ModelInfo, RankModel, RankResult, Session

MiB = 1 << 20
PROBE = Ceilings(
    storage_read_GBps=2.0,
    storage_read_n_streams_GBps=2.0,
    storage_streams=8,
    storage_block_bytes=16 * MiB,
    storage_method=storage.METHOD_O_DIRECT,
)


def fake(rates: dict[Setting, float]) -> tuple[learn.Measure, list[Setting]]:
    asked: list[Setting] = []

    def measure(setting: Setting) -> float:
        asked.append(setting)
        return rates.get(setting, 1.0)

    return measure, asked


def test_a_replay_within_the_noise_leaves_the_probe_alone() -> None:
    measure, asked = fake({})
    assert learn.learn(PROBE, 2.09, "pipelined", measure, direct_available=True) is PROBE
    assert asked == []


def test_the_probe_stops_at_the_first_setting_that_holds() -> None:
    # GIVEN a replay at 2.28 GB/s against a 2.09 GB/s probe of 8 O_DIRECT streams (the H200's pipelined cold load)
    doubled = Setting(16, 16 * MiB, True)
    measure, asked = fake({doubled: 2.3})
    learned = learn.learn(PROBE, 2.28, "pipelined", measure, direct_available=True)
    # THEN twice the streams were tried first, held, and nothing else was read
    assert asked == [doubled]
    assert learned.storage_read_GBps == 2.3 and learned.storage_streams == 16
    assert learned.storage_learned_from == "pipelined"
    assert learned.storage_method == storage.METHOD_O_DIRECT
    assert "pipelined fetched from storage at 2.28 GB/s, above the probe's 2.00 GB/s" in learned.notes[-1]
    assert "the ceiling is now 2.30 GB/s (16 streams of 16 MiB reads, O_DIRECT)" in learned.notes[-1]
    assert "still below" not in learned.notes[-1]
    # AND every report shows it: the ceilings table names the replay that taught the probe
    from ckptprof.render.rows import ceiling_rows

    labels = [label for label, _ in ceiling_rows(learned)]
    assert "storage read, cold, N streams (N=16), measured again after pipelined read faster" in labels


def test_buffered_read_ahead_is_tried_when_more_o_direct_streams_do_not_help() -> None:
    buffered = Setting(8, 16 * MiB, False)
    measure, asked = fake({buffered: 3.0})
    learned = learn.learn(PROBE, 2.9, "sglang", measure, direct_available=True)
    assert asked[-1] == buffered and len(asked) == 4  # three O_DIRECT settings first, then buffered
    assert learned.storage_read_GBps == 3.0 and learned.storage_method == storage.METHOD_BUFFERED_DROPPED


def test_when_no_setting_reaches_the_replay_the_best_is_kept_and_the_gap_is_said() -> None:
    measure, asked = fake({Setting(32, 64 * MiB, True): 2.4})
    learned = learn.learn(PROBE, 4.0, "pipelined", measure, direct_available=True)
    assert len(asked) == len(learn.settings_to_try(8, 16 * MiB, True))  # every setting was tried
    assert learned.storage_read_GBps == 2.4
    assert (
        "still below the replay: the storage's own rate moved between 1.00 and 2.40 GB/s" in learned.notes[-1]
    )
    # and when nothing beats the probe at all, its figure stays and the note says why it may have lost
    measure, _ = fake({})
    same = learn.learn(PROBE, 4.0, "pipelined", measure, direct_available=True)
    assert same.storage_read_GBps == 2.0 and "no setting read faster" in same.notes[-1]


def test_o_direct_settings_are_skipped_where_the_file_system_refuses_it() -> None:
    buffered_probe = Ceilings(
        storage_read_GBps=1.0, storage_streams=4, storage_block_bytes=MiB, storage_method="buffered-dropped"
    )
    measure, asked = fake({})
    learn.learn(buffered_probe, 2.0, "sglang", measure, direct_available=False)
    assert asked and not any(s.direct for s in asked)


def test_settings_are_new_and_cheapest_first() -> None:
    tried = learn.settings_to_try(8, 16 * MiB, True)
    assert Setting(8, 16 * MiB, True) not in tried and len(set(tried)) == len(tried)
    assert [s.streams for s in tried[:3]] == [16, 16, 32]


def cold_session(root: Path, fetched_GBps: float) -> Session:
    return Session(
        config={"strategy": "pipelined", "tp": 1},
        models=[ModelInfo(role="target", path=str(root), fs_type="ext4", total_bytes=1)],
        ranks=[RankResult(rank=0, device="cpu", models=[RankModel(role="target", wall_s=1.0)])],
        ceilings=PROBE,
        verdict=Verdict(bottleneck="storage", fetched_GBps=fetched_GBps),
    )


def test_a_run_holds_its_probe_to_its_replays_on_the_real_files(tmp_path: Path) -> None:
    from ckptprof.checkpoint.synth import synthesize
    from ckptprof.run.ceilings import hold_probe_to_replays

    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=4, size=8_000_000, seed=1)
    said: list[str] = []
    # GIVEN a replay that fetched far faster than any disk here (so every setting is read for real)
    learned = hold_probe_to_replays([cold_session(ckpt, 10_000.0)], PROBE, said.append)
    # THEN the storage was measured again on the checkpoint's own files, and the run says so
    assert said and "measuring the storage again" in said[0]
    assert learned is not PROBE and "pipelined fetched from storage at 10000.00 GB/s" in learned.notes[-1]
    # AND the sessions say so where every report prints notes
    assert "measured again" in learned.notes[-1]
    assert (learned.storage_read_GBps or 0.0) >= (PROBE.storage_read_GBps or 0.0)
    # AND a replay within the noise of the probe leaves it untouched
    assert hold_probe_to_replays([cold_session(ckpt, 2.05)], PROBE, said.append) is PROBE


@pytest.mark.parametrize("direct", [False, True])
def test_the_disk_measure_reads_the_sample_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    from ckptprof.checkpoint.synth import synthesize

    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=2, size=4_000_000, seed=2)
    files = sorted(ckpt.glob("*.safetensors"))
    measure, direct_ok = learn.disk_measure(files)
    if direct and not direct_ok:
        pytest.skip("this file system refuses O_DIRECT")
    # WHEN one setting is measured (the real read, watched on its way through storage.cold_read)
    reads: list[tuple[int, int, int, bool, storage.ColdRead]] = []
    real_cold_read = storage.cold_read

    def watched(regions: list[Region], streams: int, block: int, direct: bool) -> storage.ColdRead:
        done = real_cold_read(regions, streams, block, direct)
        reads.append((sum(r.length for r in regions), streams, block, direct, done))
        return done

    monkeypatch.setattr(storage, "cold_read", watched)
    got = measure(Setting(2, MiB, direct))
    # THEN the whole sample (both files: smaller than the 1 GiB sample) was read once, with the setting's
    # streams, block and O_DIRECT, after its pages were dropped, and the rate is those bytes over those seconds
    total = sum(f.stat().st_size for f in files)
    ((sample, streams, block, used_direct, done),) = reads
    assert (sample, done.nbytes, streams, block, used_direct) == (total, total, 2, MiB, direct)
    assert done.drop.total_bytes == total and done.drop.resident_bytes_after <= drop_tolerance(total), (
        done.drop
    )
    assert got == done.gbps == pytest.approx(total / done.seconds / 1e9)


def test_a_run_whose_replay_beats_its_ceilings_measures_again_and_says_so(small_draft: Path) -> None:
    from ckptprof import api

    # GIVEN ceilings that claim a storage far slower than this disk (as a probe that under-measured would)
    slow = Ceilings(storage_read_GBps=1e-3, storage_read_n_streams_GBps=1e-3, storage_streams=2)
    kept: list[Ceilings] = []
    # WHEN a cold replay is held against them
    runs = api.replay_strategies(
        small_draft, None, [("sglang", {})], ceilings=slow, cache="cold", on_ceilings=kept.append
    )
    session = runs.sessions[0]
    assert session.verdict is not None and (session.verdict.cold_fraction or 0) > 0.5, (
        "the cache was not dropped"
    )
    # THEN the storage was measured again, the run's sessions hold the new figure and say why, and it is kept
    assert runs.ceilings is not None and (runs.ceilings.storage_read_GBps or 0) > 1e-3
    assert runs.ceilings.storage_learned_from == "sglang" and session.ceilings == runs.ceilings
    assert any("sglang fetched from storage at" in n and "measured again" in n for n in session.notes)
    assert kept == [runs.ceilings]
    # AND the verdict is held against the new figure, not the one the replay beat
    assert "vs 0.00 GB/s cold read ceiling" not in session.verdict.summary
