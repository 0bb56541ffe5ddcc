"""A verdict held against a reused probe never calls its ceiling measured in this run (#32 item 6)."""

from __future__ import annotations

import dataclasses

from test_verdict import session  # type: ignore[import-not-found]

from ckptprof.analysis.verdict import compute_verdict


def test_a_reused_ceiling_is_not_called_measured_in_the_same_run() -> None:
    # GIVEN the cold load that reads at 110% of its storage ceiling, the ceiling reused from a probe 12 min old
    s = session(read=2.5, deser=0.09, h2d=0.3, resident=0)
    s.ceilings = dataclasses.replace(
        s.ceilings, reused={"measured_at": "2026-12-02T10:00:00+00:00", "age_s": 720.0, "max_age_s": 3600.0}
    )
    # WHEN the verdict says the two figures disagree
    note = compute_verdict(s).storage_note
    # THEN it says where the ceiling came from, not that this run measured it
    assert note is not None
    assert "same run" not in note and "reused" in note and "12 min" in note, note
