"""The typed results (ckptprof/results.py): what they write is what they read, and documents from other versions
(keys missing, keys unknown) still read."""

from __future__ import annotations

import json
from dataclasses import fields

from ckptprof.bootlog.report import PhaseReport
from ckptprof.results import (
    Ceilings,
    Prediction,
    ServerLog,
    StrategyComparison,
    StrategyRow,
    Verdict,
    positive,
    slowest_device,
)


def through_json(d: dict[str, object]) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(json.dumps(d))
    return loaded


def test_every_record_reads_back_what_it_wrote() -> None:
    ceilings = Ceilings(
        storage_read_n_streams_GBps=2.1,
        storage_streams=8,
        h2d_pinned_GBps={"cuda:0": 55.2, "cuda:1": None},
        fastsafetensors_sample=((1_000, 0.5), (2_000, 0.75)),
        notes=("no CUDA device",),
        reused={"age_s": 12.0},
    )
    assert Ceilings.from_dict(through_json(ceilings.to_dict())) == ceilings
    verdict = Verdict(
        bottleneck="storage",
        close=("storage", "h2d"),
        shares={"storage": 0.9},
        predictions=(Prediction(flags="--x", predicted_s=1.5, why="because", strategy="prefetch"),),
        incomplete=("rank 1 failed",),
        path_shares={"storage": 0.8},
        network_fs=True,
    )
    assert Verdict.from_dict(through_json(verdict.to_dict())) == verdict
    row = StrategyRow(
        strategy="pipelined", params={"readers": 4}, flags="-", status="ok", differing=("rank 0: a",)
    )
    comparison = StrategyComparison(
        rows=(row,), fastest="pipelined", fastest_flags="-", fastest_sglang=None, floor_s=1.0, summary="s"
    )
    written = through_json(comparison.to_dict())
    assert StrategyComparison.from_dict(written) == comparison
    assert written["verified"] is None  # derived, written for scripts, never read back
    log = ServerLog(
        path="boot.log",
        framework="sglang",
        state="ready",
        load_weights=(PhaseReport("load-weights", "draft", None, "a", "b", 12.5, 8, "TP3"),),
        loaders={"target": "multithread"},
    )
    assert ServerLog.from_dict(through_json(log.to_dict())) == log


def test_documents_of_other_versions_read() -> None:
    # an older verdict lacks the keys added since; a newer one holds keys this version does not know
    old = Verdict.from_dict(
        {"bottleneck": "h2d", "predictions": [{"flags": "--y", "predicted_s": 2.0, "why": "w"}]}
    )
    assert (
        old is not None
        and old.predictions[0].strategy is None
        and old.predictions[0].slower_than_now is False
    )
    assert old.close == () and old.storage_note is None
    newer = Ceilings.from_dict({"memcpy_GBps": 10.0, "quantum_GBps": 1.0})
    assert newer.memcpy_GBps == 10.0 and "quantum_GBps" not in newer.to_dict()
    # an empty document is no verdict at all, and no comparison or server log
    assert (
        Verdict.from_dict({}) is None
        and StrategyComparison.from_dict(None) is None
        and ServerLog.from_dict({}) is None
    )
    # every ceiling key is written, null where it was not measured
    assert set(Ceilings().to_dict()) == {f.name for f in fields(Ceilings)}


def test_ceilings_say_whether_anything_was_measured_and_take_new_figures() -> None:
    assert not Ceilings().measured and not Ceilings(storage_read_GBps=0.0).measured
    assert Ceilings(h2d_pinned_GBps={"cuda:0": 50.0}).measured
    again = Ceilings(storage_read_n_streams_GBps=2.0, memcpy_GBps=9.0).with_figures(
        {"storage_read_n_streams_GBps": 1.0}
    )
    assert again.storage_read_n_streams_GBps == 1.0 and again.memcpy_GBps == 9.0
    assert positive(again.storage_read_n_streams_GBps) == 1.0 and positive(again.page_cache_read_GBps) is None


def test_the_slowest_used_device_binds() -> None:
    per_device = {"cuda:0": 50.0, "cuda:1": 40.0, "cuda:2": None}
    assert slowest_device(per_device, ["cuda:0", "cuda:1"]) == 40.0
    assert slowest_device(per_device, ["cuda:0"]) == 50.0
    assert (
        slowest_device(per_device, ["cuda:2", "cuda:3"]) is None and slowest_device(None, ["cuda:0"]) is None
    )


def test_verdict_caveats_come_in_print_order() -> None:
    assert Verdict(storage_note="s", faithful_note="f").caveats == ("f", "s")
    assert Verdict().caveats == ()
