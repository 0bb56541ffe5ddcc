"""A session's ``config`` (the run's resolved configuration) and ``extra`` (results beside the timings), typed.

Both were plain dicts whose keys three places knew (the run that wrote them, the validation, each reader). Here each
key is a field with its type and meaning, so a reader writes ``session.config.tp`` and mypy checks it, and the JSON
keys stay what they were (docs/json-contract.md).

A key that is absent reads as None; ``to_dict`` writes only the keys that are set, in the order the run writes
them, so a session reads back and writes out with the keys it had. A key this version does not know (a newer
ckptprof's, or one no version types yet) is kept as it was in ``other`` and written back.

Both also read and write like the dicts they were (``config.get("tp")``, ``extra["interrupted"] = {...}``): a
record comes out as the JSON object it is written as (its JSON keys: ``cache_referee["pass"]``), and a value
stored by key is decoded into its field's type (InvalidField when it is not one). Writing by key is a
compatibility path for scripts and tests that built the dicts; ckptprof's own writers set the typed attributes
(tests/unit/test_session_typed.py holds them to it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, with_config
from pydantic.fields import FieldInfo

from ckptprof.session_fields import (
    NOT_NULL,
    Count,
    Flag,
    Frame,
    RankKey,
    Rate,
    Seconds,
    Signed,
    Text,
    decode,
)

# The JSON Schema (docs/session.schema.json) describes each field by its docstring.
_DOCSTRINGS = ConfigDict(use_attribute_docstrings=True)

# An object of JSON values, kept as read (an engine's release profile, a strategy's parameters).
JSONObject = dict[str, Any]


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: records as objects (under their JSON keys), tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # A record whose keys are written only when set (the run writes them so) leaves out its nulls.
        omit = getattr(value, "omit_null", False)
        keys = _json_keys(type(value))
        return {keys.get(k, k): _plain(v) for k, v in _fields_of(value) if v is not None or not omit}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@functools.cache
def _json_keys(cls: type) -> dict[str, str]:
    """A record's attributes whose JSON key differs (an alias: ``pass_`` is written ``pass``), by attribute."""
    out = {}
    for name, hint in _field_types(cls).items():
        for meta in getattr(hint, "__metadata__", ()):
            if isinstance(meta, FieldInfo) and isinstance(meta.alias, str):
                out[name] = meta.alias
    return out


def _fields_of(record: Any) -> Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(record):
        if f.init:
            yield f.name, getattr(record, f.name)


class _KeyedRecord(MutableMapping[str, Any]):
    """A record of optional keys that also reads and writes like the dict it is written as (see the module's
    docstring); unknown keys live in ``other``."""

    other: dict[str, Any]
    json_key: ClassVar[str] = ""
    """The record's key in the session ("config", "extra"): what a refusal's path starts with."""

    @classmethod
    def known(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The keys that are set, in field order, then the unknown ones."""
        out = {k: _plain(v) for k, v in _fields_of(self) if v is not None}
        out.update(self.other)
        return out

    def __getitem__(self, key: str) -> Any:
        if key in self.known():
            value = getattr(self, key)
            if value is None:
                raise KeyError(key)
            return value if isinstance(value, dict) and not dataclasses.is_dataclass(value) else _plain(value)
        return self.other[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self.known():
            hint = _field_types(type(self))[key]
            setattr(self, key, None if value is None else decode(hint, value, f"{self.json_key}.{key}"))
        else:
            self.other[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        """The value stored (decoded, so not ``default`` itself): what a caller goes on to fill in."""
        if key not in self:
            self[key] = default
        return self.get(key)

    def __delitem__(self, key: str) -> None:
        if key in self.known():
            if getattr(self, key) is None:
                raise KeyError(key)
            setattr(self, key, None)
        else:
            del self.other[key]

    def __iter__(self) -> Iterator[str]:
        yield from (k for k, v in _fields_of(self) if v is not None)
        yield from self.other

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _field_types(cls: type) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(cls, include_extras=True)


def _with_unknown_keys(cls: type[_KeyedRecord]) -> Any:
    """A validator for ``cls`` that keeps the keys it does not know in ``other``."""
    from pydantic import WrapValidator

    def run(value: Any, handler: Any) -> Any:
        record = handler(value)
        if isinstance(value, dict):
            record.other = {k: v for k, v in value.items() if k not in cls.known()}
        return record

    return WrapValidator(run)


@with_config(_DOCSTRINGS)
@dataclass
class FaithfulEngine:
    """The installed engine whose own code ran the faithful passes (``--faithful`` inside the serving image)."""

    omit_null: ClassVar[bool] = True

    package: Text | None = None
    """sglang or vllm."""
    version: Text | None = None
    """Its installed release."""
    module: Text | None = None
    """The module whose loading function ran."""
    file: Text | None = None
    """That module's file."""
    import_check_s: Seconds | None = None
    """How long checking that the engine imports took."""
    import_check_reused: Flag | None = None
    """True where an earlier run's answer for the same installation was reused instead of importing the engine again
    (``$CKPTPROF_CACHE/engine-checks``; ``CKPTPROF_ENGINE_CHECK=fresh`` imports it again)."""
    stand_ins: list[Text] | None = None
    """Kernel packages absent here that an import-only stand-in replaced."""


@with_config(_DOCSTRINGS)
@dataclass(eq=True)
class RunConfig(_KeyedRecord):
    """What the run replayed and how: the request resolved (release profile, strategy, devices, cache mode)."""

    json_key: ClassVar[str] = "config"

    tp: Count | None = None
    """Tensor-parallel ranks replayed."""
    devices: Annotated[list[Text] | None, NOT_NULL] = None
    """The devices asked for (cuda:0, cpu, ...)."""
    rank_devices: list[Text] | None = None
    """Each rank's device, by rank."""
    ranks_share_devices: Flag | None = None
    """More ranks than devices: several ranks copied to one device."""
    cache: Text | None = None
    """cold, warm or as-is: what was done to the page cache before the load."""
    order: Text | None = None
    """The order the shards were read in (sorted, ...)."""
    strategy: Text | None = None
    """The loading strategy replayed for the target (sglang, sglang-mt, prefetch, ...)."""
    strategy_params: JSONObject | None = None
    """Its parameters as given (``pipelined:readers=32`` gives {"readers": 32})."""
    verify: Flag | None = None
    """Whether the parameters' values were checked against SGLang's default path (--verify)."""
    faithful: Flag | None = None
    """Whether SGLang's own sequence was replayed too (--faithful)."""
    expert_parallel: Flag | None = None
    """Whether experts were sharded across ranks."""
    draft_strategy: Text | None = None
    """The draft's own strategy, when it differs from the target's."""
    draft_strategy_params: JSONObject | None = None
    """Its parameters."""
    launcher: Text | None = None
    """How the ranks started: spawn (children of ckptprof) or torchrun."""
    faithful_rounds: Count | None = None
    """Faithful passes alternated with decomposed ones (--faithful-rounds)."""
    sample_threads: Flag | None = None
    """Whether the ranks' threads were sampled in the kernel during the faithful passes (--sample-threads)."""
    faithful_source: Text | None = None
    """Whose code ran the faithful passes: the installed engine's own, or ckptprof's replica and why."""
    faithful_engine: FaithfulEngine | None = None
    """The installed engine that ran them, where it was its own code."""
    strategy_flags: Text | None = None
    """The server flags that select the replayed path(s)."""
    draft_strategy_flags: Text | None = None
    """The draft's own flags."""
    sglang_release: JSONObject | None = None
    """The SGLang release profile replayed (engines/sglang.py): version, default path, flags, and why it was chosen."""
    vllm_release: JSONObject | None = None
    """The vLLM release profile replayed (engines/vllm.py), with its prefetch decision."""
    other: dict[str, Any] = field(default_factory=dict, init=False, compare=False)

    def __post_init__(self) -> None:
        self.other = {}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> RunConfig:
        """A config from the dict a run builds (``ReplayPlan.config()``) or a document: checked as on load."""
        config: RunConfig = decode(RunConfigField, d or {}, "config")
        return config


@with_config(_DOCSTRINGS)
@dataclass
class Interrupted:
    """A run stopped early: the stage it was in and what stopped it."""

    stage: Text | None = None
    """plan, probe, ranks, faithful, ..."""
    by: Text | None = None
    """Ctrl-C, SIGTERM, a failed rank."""


@with_config(_DOCSTRINGS)
@dataclass
class ServerVsReplay:
    """One model's load as the server's log states it (``run --log``) beside the replay's (its slowest rank)."""

    model: Text = "target"
    """target or draft."""
    server_s: Seconds | None = None
    """The server's load-weights time from its log."""
    server_ranks: Count = 0
    """How many of the server's ranks the log showed loading it."""
    replay_s: Seconds | None = None
    """The replay's wall for that model (its slowest rank)."""
    ratio: Rate | None = None
    """server_s / replay_s (null where either is missing)."""


@with_config(_DOCSTRINGS)
@dataclass
class PredictionCheck:
    """One recommendation's predicted wall against the replay of its flags (``run --check-predictions``)."""

    flags: Text | None = None
    """The flags replayed."""
    strategy: Text | None = None
    """The strategy that replayed them."""
    predicted_s: Seconds | None = None
    """The wall the verdict predicted."""
    measured_s: Seconds | None = None
    """The wall measured."""
    measured_wall: Text | None = None
    """Which wall was measured (the faithful one, or the replay's)."""
    error: Signed | None = None
    """predicted / measured - 1."""
    within_tolerance: Flag | None = None
    """Within 20%."""
    status: Text | None = None
    """ok, failed, unavailable."""
    reason: Text | None = None
    """Why it was not measured."""
    baseline_s: Seconds | None = None
    """This run's wall the prediction improves on."""
    baseline_wall: Text | None = None
    """Which wall that is."""
    storage_GBps_then: Rate | None = None
    """The storage rate measured just before the replay."""
    repriced_s: Seconds | None = None
    """The prediction priced again with that rate."""
    repriced_error: Signed | None = None
    """repriced / measured - 1."""
    repriced_within_tolerance: Flag | None = None
    """That within 20%."""


@with_config(_DOCSTRINGS)
@dataclass
class StorageShares:
    """One load's storage share by the attribution (fractions of its wall)."""

    omit_null: ClassVar[bool] = True

    decomposed: Rate | None = None
    """Storage's share of rank time in the decomposed replay."""
    sampled: Rate | None = None
    """With ``--sample-threads``: storage's share of SGLang's own wall, its threads sampled in the kernel."""


@with_config(_DOCSTRINGS)
@dataclass
class CacheReferee:
    """``run --cache cold,warm``: the same load from a cold page cache and then from a warm one; what the cold load
    took beyond the warm one is what storage cost it (docs/how-it-measures.md). Kept in the cold load's session."""

    pass_: Annotated[Text | None, Field(alias="pass")] = None
    """faithful or decomposed: whose walls are compared (SGLang's own sequence when it ran, else the decomposed
    pass). Its JSON key is ``pass``."""
    cold_wall_s: Seconds | None = None
    """The cold load's wall (the slowest rank's)."""
    warm_wall_s: Seconds | None = None
    """The warm load's wall (the slowest rank's)."""
    storage_cost_s: Signed | None = None
    """Cold minus warm: what storage cost the cold load (below 0 where the warm load happened to be the slower)."""
    storage_share: Signed | None = None
    """storage_cost_s over the cold wall; null without a cold wall."""
    attributed_storage_share: StorageShares | None = None
    """The cold load's storage share by the attribution."""
    warm_attributed_storage_share: StorageShares | None = None
    """The warm load's storage share by the attribution."""
    warm_cache_notes: list[Text] | None = None
    """Each model's cache note of the warm pass."""
    incomplete: list[Text] | None = None
    """What either load did not finish; empty for a complete pair."""


PySpyFrames = dict[RankKey, dict[Text, list[Frame]]]
"""rank -> phase -> its top frames, most seconds first."""


@with_config(_DOCSTRINGS)
@dataclass(eq=True)
class SessionExtra(_KeyedRecord):
    """Results beside the timings (the comparison of strategies and the server's log are the session's own
    ``strategies`` and ``server_log``, written under "extra" too)."""

    json_key: ClassVar[str] = "extra"

    stages_s: dict[Text, Seconds] | None = None
    """Wall seconds per stage of the replay (plan, probe, ranks, ...)."""
    run_stages_s: dict[Text, Seconds] | None = None
    """Wall seconds per stage of the whole ``ckptprof run`` command."""
    interrupted: Interrupted | None = None
    """Where a run stopped early, and what stopped it."""
    cache_referee: CacheReferee | None = None
    """``run --cache cold,warm``: what storage cost the cold load (cold minus warm), beside the attribution's
    storage shares."""
    prediction_check: list[PredictionCheck] | None = None
    """``run --check-predictions``: each checked prediction."""
    py_spy_top_frames: PySpyFrames | None = None
    """``run --py-spy``: the leaf frames py-spy saw most, per rank and phase."""
    server_vs_replay: list[ServerVsReplay] | None = None
    """``run --log``: the server's load time beside the replay's, per model (derived from ``server_log``)."""
    other: dict[str, Any] = field(default_factory=dict, init=False, compare=False)

    def __post_init__(self) -> None:
        self.other = {}


RunConfigField = Annotated[RunConfig, _with_unknown_keys(RunConfig)]
SessionExtraField = Annotated[SessionExtra, _with_unknown_keys(SessionExtra)]
