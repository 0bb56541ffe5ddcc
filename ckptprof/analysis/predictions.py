"""The verdict's predictions held against replays of the flags they recommend (`run --check-predictions`).

Pure: reads the analysed session and one session per replayed recommendation. The measured figure is SGLang's
own sequence (the faithful wall) when the run has one, else the decomposed replay's wall: the prediction is for
the server's load, so it is held against the closest thing to it that was measured.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ckptprof.analysis.attribution import faithful_load_wall, load_wall
from ckptprof.analysis.strategies import session_status
from ckptprof.results import Prediction
from ckptprof.session import Session

# The bar for a useful prediction: within this fraction of the measured wall.
TOLERANCE = 0.20


def measured_wall(session: Session) -> tuple[float, str]:
    """(seconds, which wall): the faithful wall when the run has one, else the decomposed one."""
    faithful = faithful_load_wall(session)
    if faithful > 0:
        return faithful, "faithful"
    return load_wall(session), "decomposed"


def repriced(session: Session, ceilings_now: dict[str, Any], flags: str) -> float | None:
    """What the verdict would predict for ``flags`` from the same load with the ceilings measured just before its
    replay: the model held to the storage as it was then, not as it was when the run began."""
    from ckptprof.analysis.verdict import compute_verdict

    if not ceilings_now:
        return None
    again = replace(session, ceilings=session.ceilings.with_figures(ceilings_now), verdict=None)
    for prediction in compute_verdict(again).predictions:
        if prediction.flags == flags:
            return prediction.predicted_s
    return None


def check_predictions(
    session: Session,
    replays: list[tuple[Prediction, Session]],
    ceilings_then: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One row per checked prediction: predicted vs measured seconds, the error, and whether it is within 20%.

    ``ceilings_then`` (one per replay) are the drifting ceilings measured just before each replay: each row then
    also holds the prediction re-priced with them, its error, and the storage rate at the time."""
    rows = []
    baseline, baseline_kind = measured_wall(session)
    for index, (prediction, replay) in enumerate(replays):
        then = ceilings_then[index] if ceilings_then and index < len(ceilings_then) else {}
        status, error = session_status(replay)
        row: dict[str, Any] = {
            "flags": prediction.flags,
            "strategy": prediction.strategy,
            "predicted_s": prediction.predicted_s,
            "measured_s": None,
            "measured_wall": None,
            "error": None,
            "within_tolerance": None,
            "status": status,
            "reason": error,
            "baseline_s": round(baseline, 4) if baseline > 0 else None,
            "baseline_wall": baseline_kind,
            "storage_GBps_then": then.get("storage_read_n_streams_GBps"),
            "repriced_s": None,
            "repriced_error": None,
            "repriced_within_tolerance": None,
        }
        again = repriced(session, then, prediction.flags) if then else None
        if again is not None:
            row["repriced_s"] = round(again, 4)
        if status == "ok":
            wall, kind = measured_wall(replay)
            predicted = prediction.predicted_s
            row["measured_s"], row["measured_wall"] = round(wall, 4), kind
            if isinstance(predicted, (int, float)) and wall > 0 and math.isfinite(predicted):
                row["error"] = round(predicted / wall - 1.0, 4)
                row["within_tolerance"] = abs(predicted / wall - 1.0) <= TOLERANCE
            if again is not None and wall > 0:
                row["repriced_error"] = round(again / wall - 1.0, 4)
                row["repriced_within_tolerance"] = abs(again / wall - 1.0) <= TOLERANCE
        rows.append(row)
    return rows
