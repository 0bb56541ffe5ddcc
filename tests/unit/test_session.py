from __future__ import annotations

import json
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ckptprof.errors import SessionFileError
from ckptprof.results import Ceilings, Verdict
from ckptprof.session import (
    SCHEMA_VERSION,
    ModelInfo,
    RankModel,
    RankResult,
    Session,
    ShardInfo,
    ShardTiming,
    dumps_strict,
)


def sample() -> Session:
    return Session(
        config={"tp": 2, "devices": ["cpu"], "cache": "cold", "strategy": "sglang"},
        models=[
            ModelInfo(role="draft", path="/x", fs_type="ext4", total_bytes=10, shards=[ShardInfo("a", 10, 1)])
        ],
        ranks=[
            RankResult(
                rank=0,
                device="cpu",
                models=[
                    RankModel(role="draft", wall_s=1.0, shards=[ShardTiming(file="a", bytes=10, read_s=0.5)])
                ],
            )
        ],
        ceilings=Ceilings.from_dict({"storage_read_GBps": 1.4}),
        verdict=Verdict.from_dict({"bottleneck": "storage"}),
    )


def test_round_trip(tmp_path: Path) -> None:
    s = sample()
    path = s.save(tmp_path / "run" / "session.json")
    again = Session.load(path)
    assert again == s
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    assert next(iter(json.loads(path.read_text()))) == "schema_version"


def test_contract_keys_are_present() -> None:
    d = sample().to_dict()
    assert {"schema_version", "config", "models", "ranks", "ceilings", "verdict"} <= set(d)
    shard = d["ranks"][0]["models"][0]["shards"][0]
    for key in (
        "file",
        "bytes",
        "storage_bytes",
        "major_faults",
        "read_s",
        "deserialize_s",
        "h2d_s",
        "h2d_bytes",
        "wall_s",
    ):
        assert key in shard
    assert {"role", "path", "fs_type", "total_bytes", "shards"} <= set(d["models"][0])
    assert {"rank", "device", "status", "error", "models"} <= set(d["ranks"][0])


def test_newer_fields_are_ignored_older_versions_refused(tmp_path: Path) -> None:
    d = sample().to_dict()
    d["ranks"][0]["models"][0]["shards"][0]["future_field"] = 1
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    assert Session.load(p).ranks[0].models[0].shards[0].read_s == 0.5
    d["schema_version"] = 99
    p.write_text(json.dumps(d))
    with pytest.raises(SessionFileError, match="schema_version"):
        Session.load(p)


@pytest.mark.parametrize("content", ["", "{", "[]", '{"schema_version": 1, "ranks": [3]}'])
def test_bad_session_files(tmp_path: Path, content: str) -> None:
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(SessionFileError) as info:
        Session.load(p)
    assert str(p) in str(info.value)


def test_a_binary_file_is_named_as_not_a_session(tmp_path: Path) -> None:
    p = tmp_path / "trace.bin"
    p.write_bytes(b"\x00\xea\xff" * 100)
    with pytest.raises(SessionFileError, match=r"not a session JSON file \(binary, not UTF-8 text\)"):
        Session.load(p)


# -- validation on load: one line naming the file and the field, never a traceback or nonsense ----------------

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def rich() -> dict[str, Any]:
    """A session document with every part the renderers read: models, ranks, ceilings, verdict, extra."""
    d = sample().to_dict()
    d["ranks"][0]["models"][0]["shards"][0].update(wall_s=1.0, h2d_s=0.2, deserialize_s=0.1, h2d_bytes=5)
    d["ceilings"] = {"storage_read_GBps": 1.4, "h2d_pinned_GBps": {"cpu": 10.0}, "storage_streams": 8}
    d["verdict"] = {"bottleneck": "storage", "summary": "s", "load_wall_s": 1.0, "rank_skew": 1.0}
    d["extra"] = {
        "strategies": {"rows": [{"strategy": "sglang", "status": "ok", "wall_s": 1.0}], "warnings": []},
        "prediction_check": [{"predicted_s": 1.0, "measured_s": 1.1, "error": -0.1}],
        "py_spy_top_frames": {"0": {"read": [["f (x.py:1)", 0.5]]}},
    }
    return d


def set_field(d: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``set_field(d, "ranks.0.models.0.wall_s", v)``; the value DELETE removes the key."""
    *parents, last = dotted.split(".")
    node: Any = d
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is DELETE:
        del node[last]
    else:
        node[int(last) if isinstance(node, list) else last] = value
    return d


DELETE = object()


def load_text(tmp_path: Path, text: str) -> Session:
    p = tmp_path / "s.json"
    p.write_text(text)
    return Session.load(p)


def test_a_rich_session_document_loads(tmp_path: Path) -> None:
    session = load_text(tmp_path, json.dumps(rich()))
    assert session.strategies is not None and session.strategies.rows[0].wall_s == 1.0
    # and the comparison is written back where it was read from
    assert json.loads(session.to_json())["extra"]["strategies"]["rows"][0]["wall_s"] == 1.0


@pytest.mark.parametrize(
    ("token", "where"),
    [
        ("NaN", "ranks[0].wall_s"),
        ("Infinity", "ranks[0].models[0].shards[0].read_s"),
        ("-Infinity", "ranks[0].models[0].wall_s"),
        ("1e999", "ceilings.storage_read_GBps"),
        ("NaN", "verdict.load_wall_s"),
        ("NaN", "extra.custom"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_file_and_field(
    tmp_path: Path, token: str, where: str
) -> None:
    # GIVEN a session whose field holds NaN or an infinity (Python's json reads them without complaint)
    d = rich()
    dotted = where.replace("[", ".").replace("]", "")
    set_field(d, dotted, "@@")
    text = json.dumps(d).replace('"@@"', token)
    # WHEN it is loaded THEN it is refused in one line that names the file and the field
    with pytest.raises(SessionFileError) as info:
        load_text(tmp_path, text)
    # (the whole line is compared: pytest names the folder after the test, so "finite" is in the path too)
    shown = "Infinity" if token == "1e999" else token
    assert str(info.value) == (
        f"{tmp_path / 's.json'}: not a valid ckptprof session: field {where}: not a finite number ({shown})"
    )


@pytest.mark.parametrize(
    ("dotted", "value", "words"),
    [
        ("ranks.0.wall_s", "3.5", "ranks[0].wall_s: expected a number of seconds >= 0, got the string '3.5'"),
        ("ranks.0.models.0.shards.0.read_s", -0.5, "read_s: expected a number of seconds >= 0, got -0.5"),
        ("ranks.0.models.0.wall_s", None, "ranks[0].models[0].wall_s: expected a number of seconds"),
        ("ranks.0.models.0.shards.0.h2d_s", True, "h2d_s: expected a number of seconds >= 0, got true"),
        ("ranks.0.models.0.shards.0.wall_s", 1e300, "wall_s: expected a number of seconds >= 0"),
        ("ranks.0.models.0.shards.0.wall_s", 5e-324, "below any clock's resolution"),
        ("ranks.0.models.0.shards.0.bytes", -1, "shards[0].bytes: expected a whole number >= 0, got -1"),
        ("ranks.0.models.0.shards.0.bytes", 1.5, "bytes: expected a whole number >= 0, got 1.5"),
        ("ranks.0.models.0.shards.0.bytes", 10**40, "bytes: expected a whole number >= 0, got 1e+40"),
        ("models.0.total_bytes", "10", "models[0].total_bytes: expected a whole number >= 0"),
        ("ranks.0.rank", -1, "ranks[0].rank: expected a whole number >= 0"),
        ("ranks.0.rank", DELETE, "ranks[0]: missing field 'rank'"),
        ("ranks.0.models.0.faithful_walls", [1.0, "x"], "faithful_walls[1]: expected a number of seconds"),
        ("ranks.0.models.0.shards", "abc", "ranks[0].models[0].shards: expected a list"),
        ("ranks.0.models.0.shards.0", 3, "ranks[0].models[0].shards[0]: expected an object, got 3"),
        ("ranks.0.status", 0, "ranks[0].status: expected a string, got 0"),
        ("ranks", {"0": {}}, "ranks: expected a list, got an object"),
        ("models", "m", "models: expected a list"),
        ("config", [], "config: expected an object, got a list"),
        ("config.devices", "cpu", "config.devices: expected a list"),
        ("config.faithful_rounds", "3", "config.faithful_rounds: expected a whole number"),
        ("notes", [1], "notes[0]: expected a string, got 1"),
        ("ceilings.storage_read_GBps", "1.4", "ceilings.storage_read_GBps: expected a number >= 0"),
        ("ceilings.h2d_pinned_GBps", 10.0, "ceilings.h2d_pinned_GBps: expected an object"),
        ("ceilings.h2d_pinned_GBps.cpu", -1, "ceilings.h2d_pinned_GBps.cpu: expected a number >= 0, got -1"),
        ("verdict.load_wall_s", "1.0", "verdict.load_wall_s: expected a number of seconds"),
        ("verdict.rank_skew", -255967232.0, "verdict.rank_skew: expected a number >= 0"),
        ("extra.strategies.rows.0.status", DELETE, "extra.strategies.rows[0]: missing field 'status'"),
        ("extra.strategies.warnings", None, "extra.strategies.warnings: expected a list, got null"),
        ("extra.prediction_check.0.predicted_s", "1", "prediction_check[0].predicted_s: expected a number"),
        ("extra.py_spy_top_frames.0.read.0", ["f", "0.5"], "read[0][1]: expected a number of seconds"),
        ("created", 5, "created: expected a string, got 5"),
    ],
)
def test_wrong_types_and_impossible_values_are_refused_naming_the_field(
    tmp_path: Path, dotted: str, value: Any, words: str
) -> None:
    # GIVEN a session with one field of the wrong type or an impossible value
    text = json.dumps(set_field(rich(), dotted, value))
    # WHEN it is loaded THEN one line names the file and says which field and what is wrong with it
    with pytest.raises(SessionFileError) as info:
        load_text(tmp_path, text)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 's.json'}: not a valid ckptprof session: field ")
    assert words in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"schema_version": 1, "ranks": [{"rank": 0, "device": "x", "pid": ' + "1" * 5000 + "}]}", "digits"),
        ('{"schema_version": 1, "extra": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
    ids=["huge-integer", "deep-nesting"],
)
def test_pathological_json_is_one_line_not_a_traceback(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(SessionFileError, match=words):
        load_text(tmp_path, text)


@pytest.mark.parametrize(
    ("seconds", "loads"),
    [(1e9, True), (1e9 * (1 + 1e-9), False), (1e12, False), (1e-12, True), (0.99e-12, False)],
    ids=["at-the-cap", "just-over-the-cap", "far-over-the-cap", "at-the-resolution", "below-the-resolution"],
)
def test_seconds_are_held_to_both_ends_of_their_range(tmp_path: Path, seconds: float, loads: bool) -> None:
    # GIVEN a shard's wall of ``seconds``: at most 1e9 s (30 years; more is corrupt) and, if not 0, at least 1 ps
    text = json.dumps(set_field(rich(), "ranks.0.models.0.shards.0.wall_s", seconds))
    if loads:
        # THEN a value at either end loads as it was written
        assert load_text(tmp_path, text).ranks[0].models[0].shards[0].wall_s == seconds
        return
    # THEN one past either end is refused, naming the field
    with pytest.raises(SessionFileError) as info:
        load_text(tmp_path, text)
    field = "ranks[0].models[0].shards[0].wall_s"
    problem = (
        f"expected a number of seconds >= 0, got {seconds!r}"
        if seconds > 1
        else f"{seconds!r} seconds is below any clock's resolution"
    )
    assert str(info.value) == f"{tmp_path / 's.json'}: not a valid ckptprof session: field {field}: {problem}"


def test_values_at_the_edges_of_their_ranges_load(tmp_path: Path) -> None:
    # GIVEN zero and maximal counts, zero and tiny durations, null optional fields
    d = rich()
    set_field(d, "ranks.0.models.0.shards.0.bytes", 2**63 - 1)
    set_field(d, "ranks.0.models.0.shards.0.read_s", 0)
    set_field(d, "ranks.0.models.0.shards.0.h2d_s", 1e-9)
    set_field(d, "ranks.0.models.0.faithful_wall_s", None)
    set_field(d, "ranks.0.wall_s", 3)  # older sessions wrote whole seconds as ints
    set_field(d, "ceilings.h2d_pinned_all_devices_GBps", None)
    set_field(d, "verdict.faithful_delta", -0.2)  # a signed figure
    set_field(d, "ranks.0.models.0.shards.0.future_field", "anything")  # a newer ckptprof's field
    # THEN the session loads
    session = load_text(tmp_path, json.dumps(d))
    assert session.ranks[0].models[0].shards[0].bytes == 2**63 - 1


def test_session_json_is_strict_even_for_non_finite_values_in_memory() -> None:
    # GIVEN a session in memory that holds NaN and infinities (e.g. a verdict ratio over a zero wall)
    s = sample()
    s.verdict = replace(s.verdict or Verdict(), rank_skew=float("nan"))
    s.ceilings = replace(s.ceilings, h2d_pinned_GBps={"cuda:0": float("inf")})
    s.ranks[0].models[0].faithful_walls = [1.0, float("-inf")]
    # WHEN it is written THEN the JSON is strict (no NaN / Infinity tokens): those values are null
    text = s.to_json()
    data = json.loads(text, parse_constant=lambda token: pytest.fail(f"non-JSON token {token}"))
    assert data["verdict"]["rank_skew"] is None and data["ceilings"]["h2d_pinned_GBps"]["cuda:0"] is None
    assert data["ranks"][0]["models"][0]["faithful_walls"] == [1.0, None]
    assert dumps_strict({"x": (float("nan"), 1.5)}) == '{"x": [null, 1.5]}'


def archived_sessions(tmp: Path) -> list[Path]:
    """Session JSON files inside the tar.gz archives under reports/ (older runs, kept compressed)."""
    out = []
    for i, archive in enumerate(sorted(REPORTS.rglob("*.tar.gz"))):
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")]
            for m in members:
                data = tar.extractfile(m)
                assert data is not None
                target = tmp / str(i) / m.name.replace("/", "_")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data.read())
                out.append(target)
    return out


def _read_json(path: Path) -> Any:
    import gzip

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw)


def _keeps(new: Any, old: Any) -> bool:
    """``new`` holds everything ``old`` did (keys may be added, never dropped or changed)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _keeps(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(_keeps, new, old))
    return bool(new == old)


def test_every_session_the_project_wrote_still_loads(tmp_path: Path) -> None:
    # GIVEN every session JSON committed under reports/, the compressed ones too
    paths = [*REPORTS.rglob("*.json"), *REPORTS.rglob("*.json.gz"), *archived_sessions(tmp_path)]
    sessions = []
    for path in paths:
        # A committed JSON file that cannot be read is a broken report: it fails here, it is not passed over.
        data = _read_json(path)
        if isinstance(data, dict) and "schema_version" in data and "ranks" in data:
            sessions.append((path, data))
    # reports/ holds the project's measured runs: finding none means this test looked in the wrong place
    assert sessions, f"no session found under {REPORTS}"
    for path, data in sessions:
        # THEN each of them passes the validation
        loaded = Session.load(path)
        # AND its typed verdict and ceilings write back every key it had, with the same value: reading a session
        # into the typed model loses nothing a script could have read from the file
        again = json.loads(loaded.to_json())
        for part in ("verdict", "ceilings"):
            assert _keeps(again[part], data.get(part) or {}), (path, part)


def test_a_compressed_session_loads_like_the_plain_one(tmp_path: Path) -> None:
    import gzip

    session = Session(config={"tp": 1}, created="2026-11-30T00:00:00+00:00")
    plain = session.save(tmp_path / "session.json")
    packed = tmp_path / "session.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert Session.load(packed).to_dict() == Session.load(plain).to_dict()
    # a .gz that is not gzip, or only half of one, is one clear error naming the file
    (tmp_path / "bad.json.gz").write_bytes(plain.read_bytes())
    (tmp_path / "cut.json.gz").write_bytes(packed.read_bytes()[:20])
    for bad in ("bad.json.gz", "cut.json.gz"):
        with pytest.raises(SessionFileError, match="not a whole gzip file"):
            Session.load(tmp_path / bad)
