"""``--check-predictions``: replay every flag set the verdict recommends and hold each prediction to the wall
measured, re-priced with the storage measured just before (storage drifts between replays)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ckptprof.session import Session
from ckptprof.session_config import PredictionCheck


def check_recommendations(
    session: Session, replay_one: Callable[..., Session], say: Callable[[str], None]
) -> None:
    """Replay each recommended flag set the verdict has a prediction and a strategy for; record predicted vs
    measured in ``session.extra.prediction_check``."""
    from ckptprof.analysis.predictions import check_predictions
    from ckptprof.loader.strategies import parse_spec
    from ckptprof.run.ceilings import checkpoint_files

    replays = []
    ceilings_then: list[dict[str, Any]] = []
    paths = checkpoint_files(session)  # listed once for every re-measure below
    for prediction in session.verdict.predictions if session.verdict is not None else ():
        spec = prediction.strategy
        if not spec or prediction.predicted_s is None:
            continue
        name, params = parse_spec(spec)
        say(f"checking the prediction for {prediction.flags} ({spec}) ...")
        ceilings_then.append(storage_now(session, fastsafetensors=name == "fastsafetensors", paths=paths))
        replays.append((prediction, replay_one(strategy=name, strategy_params=params)))
    rows = check_predictions(session, replays, ceilings_then)
    session.extra.prediction_check = [PredictionCheck(**row) for row in rows]


def storage_now(session: Session, fastsafetensors: bool, paths: list[Path] | None = None) -> dict[str, Any]:
    """The drifting ceilings measured again just before a checked replay (nothing when the run had no probe, or
    the files cannot be read: the check then holds the first prediction alone). ``paths``: the session's files,
    when the caller has listed them already."""
    from ckptprof.probe.run_probes import measure_storage_now
    from ckptprof.run.ceilings import checkpoint_files

    if not session.ceilings.storage_read_n_streams_GBps:
        return {}
    files = paths if paths is not None else checkpoint_files(session)
    if files is None:
        return {}
    devices = [str(d) for d in session.config.devices or []]
    try:
        return measure_storage_now(
            files, devices, session.ceilings.storage_streams, fastsafetensors=fastsafetensors
        )
    except OSError:
        return {}


def nothing_to_check(session: Session) -> str | None:
    """Why ``--check-predictions`` could replay nothing for this session, or None when there is a flag to check."""
    predictions = session.verdict.predictions if session.verdict is not None else ()
    priced = [p for p in predictions if p.predicted_s is not None]
    if any(p.strategy for p in priced):
        return None
    if not session.ceilings.storage_read_n_streams_GBps and not predictions:
        return "no ceilings were measured (--no-probe), so the verdict priced no flag"
    if not priced:
        return "the verdict recommends no flag with a predicted wall for this load"
    return "no flag the verdict prices has a path ckptprof can replay"
