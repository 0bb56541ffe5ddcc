"""The session's config and extra, typed (issue 38): sessions written by earlier versions load and render the same,
the typed records read and write like the dicts they replaced, and docs/session.schema.json is the model's schema.

The fixtures under tests/fixtures/sessions/ are real sessions from reports/ (2026-11-30 to 2026-12-02), one per
shape the JSON has had: the oldest (no strategy_params, no strategy_flags), prediction checks, a strategy
comparison, py-spy frames, vLLM with its own engine's faithful pass, sampled shares; and a ``--cache cold,warm``
run written before ``extra.cache_referee`` was typed (2026-12-03, the 2-core VM: ``ckptprof run --synth-size 16MB
--cache cold,warm --faithful --sample-threads --no-probe --devices cpu``).
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ckptprof.render import RENDERERS
from ckptprof.session import InvalidField, RunConfig, Session, SessionExtra, validate_session_dict
from ckptprof.session_config import (
    CacheReferee,
    FaithfulEngine,
    Interrupted,
    PredictionCheck,
    StorageShares,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "sessions").glob("*.json.gz"))


def document(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


def keeps(new: Any, old: Any, where: str = "") -> list[str]:
    """Where ``new`` lost or changed something ``old`` held (keys may be added; 3 and 3.0 are one number)."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [where]
        return [
            p
            for k, v in old.items()
            for p in ([f"{where}.{k}"] if k not in new else keeps(new[k], v, f"{where}.{k}"))
        ]
    if isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            return [where]
        return [
            p for i, (n, o) in enumerate(zip(new, old, strict=True)) for p in keeps(n, o, f"{where}[{i}]")
        ]
    same = new == old and (isinstance(new, bool) == isinstance(old, bool))
    return [] if same else [f"{where}: {old!r} -> {new!r}"]


def test_there_is_a_fixture_for_each_shape_of_the_json() -> None:
    configs = [document(p)["config"] for p in FIXTURES]
    extras = [document(p)["extra"] for p in FIXTURES]
    assert any("strategy_params" not in c for c in configs)  # the oldest shape
    assert any("vllm_release" in c and "faithful_engine" in c for c in configs)
    for key in ("prediction_check", "strategies", "py_spy_top_frames", "stages_s", "cache_referee"):
        assert any(key in e for e in extras), key


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_an_older_session_loads_and_writes_back_what_it_held(path: Path) -> None:
    # GIVEN a session an earlier ckptprof wrote
    old = document(path)
    # WHEN this version loads it and writes it out again
    session = Session.load(path)
    again = json.loads(session.to_json())
    # THEN every key it had is there with its value (keys may be added: the contract adds, never removes)
    assert keeps(again, old) == []
    # AND config and extra are written with exactly the keys they had, in the order they had them
    assert list(again["config"]) == list(old["config"])
    assert set(again["extra"]) == set(old["extra"])
    # AND the typed attributes hold the file's values
    assert session.config.tp == old["config"]["tp"] and session.config.cache == old["config"]["cache"]
    assert session.config.strategy_params == old["config"].get("strategy_params")
    if "prediction_check" in old["extra"]:
        checks = session.extra.prediction_check or []
        assert [c.predicted_s for c in checks] == [c["predicted_s"] for c in old["extra"]["prediction_check"]]
    if "stages_s" in old["extra"]:
        assert session.extra.stages_s == old["extra"]["stages_s"]
    if "cache_referee" in old["extra"]:
        referee, held = session.extra.cache_referee, old["extra"]["cache_referee"]
        assert referee is not None and "cache_referee" not in session.extra.other
        assert referee.pass_ == held["pass"] and referee.storage_share == held["storage_share"]
        assert referee.attributed_storage_share == StorageShares(**held["attributed_storage_share"])
        assert list(again["extra"]["cache_referee"]) == list(held)  # "pass", not "pass_", and in its order


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_an_older_session_renders_the_same_after_a_round_trip(path: Path, tmp_path: Path) -> None:
    # GIVEN an older session, loaded, and the same session written by this version and loaded again
    first = Session.load(path)
    second = Session.load(first.save(tmp_path / "again.json"))
    # THEN both are the same data and every format renders them alike
    assert second == first
    for name, render in RENDERERS.items():
        assert render(second) == render(first), name


def test_config_reads_and_writes_like_the_dict_it_was() -> None:
    # GIVEN a config built as the run builds it, then keys set as the run's stages set them
    config = RunConfig(tp=2, devices=["cpu"], cache="cold", strategy="sglang", strategy_params={})
    config["launcher"] = "spawn"
    config["faithful_engine"] = {"package": "sglang", "version": "0.5.4", "import_check_s": 1.5}
    # THEN attribute and key access agree, absent keys read as absent, and the JSON keeps the run's order
    assert config.launcher == config["launcher"] == "spawn"
    assert config.faithful_engine is not None and config.faithful_engine.import_check_s == 1.5
    assert config.get("faithful_engine") == {"package": "sglang", "version": "0.5.4", "import_check_s": 1.5}
    assert "vllm_release" not in config and config.get("vllm_release") is None and config.vllm_release is None
    assert list(config.to_dict()) == [
        "tp", "devices", "cache", "strategy", "strategy_params", "launcher", "faithful_engine"
    ]  # fmt: skip
    assert sorted(dict(config.items())) == sorted(config.to_dict())
    # AND a value of the wrong type is refused by key as it is on load, naming the field
    with pytest.raises(
        InvalidField, match=r"^config\.faithful_rounds: expected a whole number >= 0, got -1$"
    ):
        config["faithful_rounds"] = -1
    with pytest.raises(
        InvalidField, match=r"^config\.sample_threads: expected true or false, got the string"
    ):
        config["sample_threads"] = "yes"


def test_extra_records_are_typed_and_a_dict_given_is_decoded() -> None:
    session = Session(extra={"interrupted": {"stage": "probe", "by": "SIGTERM"}, "custom": [1]})
    assert session.extra.interrupted == Interrupted(stage="probe", by="SIGTERM")
    assert session.extra.get("interrupted") == {
        "stage": "probe",
        "by": "SIGTERM",
    }  # as the dict it is written as
    assert session.extra.other == {"custom": [1]}
    # the stage timer fills in the dict setdefault hands it: that is the one stored
    session.extra.setdefault("stages_s", {})["plan"] = 0.25
    assert session.extra.stages_s == {"plan": 0.25}
    session.extra["prediction_check"] = [{"flags": "--x", "predicted_s": 2.0, "error": -0.1}]
    assert session.extra.prediction_check == [PredictionCheck(flags="--x", predicted_s=2.0, error=-0.1)]
    assert session.to_dict()["extra"]["custom"] == [1]
    assert isinstance(Session().extra, SessionExtra) and Session().to_dict()["extra"] == {}


def test_a_script_still_writes_by_key_the_json_keys_it_knows() -> None:
    # GIVEN a session a script fills in as the dicts config and extra were (the compatibility path), with the
    # referee's JSON key "pass", a Python keyword, as it is written
    session = Session(config={"tp": 1})
    session.extra["cache_referee"] = {"pass": "decomposed", "storage_share": 0.85, "incomplete": []}
    # THEN it is decoded into the typed record, read back by key as written, and saved under the same keys
    referee = session.extra.cache_referee
    assert referee == CacheReferee(pass_="decomposed", storage_share=0.85, incomplete=[])
    assert session.extra["cache_referee"]["pass"] == "decomposed"
    assert session.extra.other == {}
    saved = session.to_dict()["extra"]["cache_referee"]
    assert saved["pass"] == "decomposed" and "pass_" not in saved
    assert Session.from_dict(session.to_dict()).extra.cache_referee == referee
    # AND what the field cannot hold is refused by key as on load, the path in the JSON's words
    with pytest.raises(InvalidField, match=r"^extra\.cache_referee\.pass: expected a string, got 3$"):
        session.extra["cache_referee"] = {"pass": 3}
    with pytest.raises(
        InvalidField,
        match=r"^extra\.cache_referee\.attributed_storage_share\.sampled: expected a number >= 0, got -0\.5$",
    ):
        session.extra["cache_referee"] = {"attributed_storage_share": {"sampled": -0.5}}
    # AND cold minus warm may come out below zero (a warm load that happened to be slower): a signed figure
    session.extra["cache_referee"] = {"storage_cost_s": -0.01, "storage_share": -0.05}
    assert session.extra.cache_referee == CacheReferee(storage_cost_s=-0.01, storage_share=-0.05)


def _keyed_writes(tree: ast.AST) -> list[int]:
    """Lines that write a session's config or extra by key: ``x.config[k] = v``, ``del x.extra[k]``,
    ``x.extra.setdefault(...)``, ``x.config.update(...)``, ``x.extra.pop(...)``."""

    def keyed(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("config", "extra")

    lines = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        lines += [t.lineno for t in targets if isinstance(t, ast.Subscript) and keyed(t.value)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "update", "pop", "popitem", "clear")
            and keyed(node.func.value)
        ):
            lines.append(node.lineno)
    return lines


def test_ckptprofs_own_writers_set_the_typed_attributes() -> None:
    # GIVEN every module of the package (writing by key is the scripts' compatibility path, not ckptprof's own)
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "ckptprof").rglob("*.py"))
        if (lines := _keyed_writes(ast.parse(path.read_text(encoding="utf-8"))))
    }
    # THEN none writes a session's config or extra by key
    assert found == {}
    # AND the check sees such a write where there is one
    assert _keyed_writes(ast.parse("s.extra['k'] = 1\ndel s.config['k']\ns.extra.setdefault('k', {})")) == [
        1,
        2,
        3,
    ]


def test_the_faithful_engine_is_recorded_as_its_typed_record(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an engine whose own code imports here, one kernel package replaced by a stand-in
    from ckptprof.loader.strategies import sglang_own
    from ckptprof.run import stages

    identity = {"package": "sglang", "version": "0.5.4", "module": "m", "file": "f.py", "stand_ins": ("k",)}
    check = sglang_own.EngineCheck(True, "SGLang's own", identity)
    monkeypatch.setattr(sglang_own, "check_engine", lambda plan, iterator: check)
    session = Session(config={"tp": 1})
    plan = SimpleNamespace(faithful_own=False)
    options = SimpleNamespace(faithful_rounds=1, sample_threads=False, engine_iterator=None)
    # WHEN the faithful passes' settings are recorded
    stages._faithful_config(session, plan, options, None)  # type: ignore[arg-type]
    # THEN the engine is a FaithfulEngine, written with the keys it always had, in their order
    engine = session.config.faithful_engine
    assert isinstance(engine, FaithfulEngine) and engine.stand_ins == ["k"] and plan.faithful_own
    assert engine.import_check_s is not None and engine.import_check_s >= 0
    written = session.to_dict()["config"]["faithful_engine"]
    assert list(written) == ["package", "version", "module", "file", "import_check_s", "stand_ins"]
    assert Session.from_dict(session.to_dict()).config.faithful_engine == engine


def test_unknown_keys_of_config_and_extra_are_kept_and_still_checked_for_finiteness() -> None:
    d: dict[str, Any] = {
        "schema_version": 1,
        "config": {"tp": 1, "from_a_newer_ckptprof": {"x": 1}},
        "extra": {"later": "y"},
    }
    session = Session.from_dict(d)
    assert session.config.other == {"from_a_newer_ckptprof": {"x": 1}}
    assert session.to_dict()["config"] == {"tp": 1, "from_a_newer_ckptprof": {"x": 1}}
    assert session.to_dict()["extra"] == {"later": "y"}
    d["config"]["from_a_newer_ckptprof"] = {"x": math.inf}
    with pytest.raises(InvalidField, match=r"^config\.from_a_newer_ckptprof\.x: not a finite number"):
        validate_session_dict(d)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"config": {"verify": "no"}}, "config.verify: expected true or false, got the string 'no'"),
        ({"config": {"devices": None}}, "config.devices: expected a list, got null"),
        ({"config": {"faithful_engine": {"import_check_s": -1}}}, "config.faithful_engine.import_check_s"),
        (
            {"extra": {"stages_s": {"probe": "slow"}}},
            "extra.stages_s.probe: expected a number of seconds >= 0",
        ),
        ({"extra": {"interrupted": {"stage": 3}}}, "extra.interrupted.stage: expected a string, got 3"),
        ({"verdict": {"close": "storage"}}, "verdict.close: expected a list, got the string 'storage'"),
        ({"ceilings": {"later_GBps": -3}}, "ceilings.later_GBps: expected a number >= 0, got -3"),
    ],
)
def test_the_typed_keys_refuse_what_they_cannot_hold(d: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidField) as info:
        validate_session_dict(d)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_published_schema_is_what_the_model_says_now() -> None:
    # GIVEN the generator that writes the JSON Schema from the data model
    gen = load_script("gen_session_schema")
    # THEN the committed schema is exactly what it writes now (a field added or retyped makes it stale)
    committed = (ROOT / "docs" / "session.schema.json").read_text(encoding="utf-8")
    assert committed == gen.render(), (
        "docs/session.schema.json is stale: run python scripts/gen_session_schema.py"
    )


def test_the_schema_names_every_key_the_fixtures_hold() -> None:
    schema = json.loads((ROOT / "docs" / "session.schema.json").read_text(encoding="utf-8"))
    defs = schema["$defs"]
    config_keys = set(defs["RunConfig"]["properties"])
    extra_keys = set(defs["_Extra"]["properties"])
    assert set(schema["properties"]) >= {"schema_version", "config", "models", "ranks", "ceilings", "verdict"}
    for path in FIXTURES:
        d = document(path)
        assert set(d["config"]) <= config_keys, path.name
        assert set(d["extra"]) <= extra_keys, path.name
        shard = d["ranks"][0]["models"][0]["shards"][0]
        assert set(shard) <= set(defs["ShardTiming"]["properties"]), path.name
    # the ranges a refusal enforces are in the schema too
    assert defs["ShardTiming"]["properties"]["read_s"]["maximum"] == 1e9
    assert defs["ShardTiming"]["properties"]["bytes"]["minimum"] == 0


def test_a_reused_import_check_is_said_in_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an engine check answered from an earlier run's memo (engine_import_memo.py)
    from ckptprof.loader.strategies import sglang_own
    from ckptprof.run import stages

    identity = {
        "package": "sglang",
        "version": "0.5.23",
        "module": "m",
        "file": "f.py",
        "import_check_reused": True,
    }
    monkeypatch.setattr(
        sglang_own, "check_engine", lambda plan, iterator: sglang_own.EngineCheck(True, "x", identity)
    )
    session = Session(config={"tp": 1})
    options = SimpleNamespace(faithful_rounds=1, sample_threads=False, engine_iterator=None)
    stages._faithful_config(session, SimpleNamespace(faithful_own=False), options, None)  # type: ignore[arg-type]
    # THEN the session says so, and reads back the same
    written = session.to_dict()["config"]["faithful_engine"]
    assert written["import_check_reused"] is True
    assert Session.from_dict(session.to_dict()).config.faithful_engine == session.config.faithful_engine
