"""The kinds of value a session holds (counts, seconds, rates, signed figures) and how a bad one is reported.

A session file is input: edited by hand, written by another tool, truncated into nonsense. The data model's
dataclasses (session.py, results.py, session_config.py) annotate each field with one of the kinds below, and
pydantic decodes a document into them (``decode``), checking every field where it reads it. A refusal is one line
that names the field's path and what was wrong with it, in the words of the field's kind
(``ranks[0].models[0].shards[0].read_s: expected a number of seconds >= 0, got -0.5``), whatever pydantic's own
message: the words are derived here from the declared type at the failing path and the value found there.

Why pydantic (v2) rather than msgspec: both decode the same stdlib dataclasses in compiled code at the same speed
(13-14 ms for the 3,000 shard timings of benchmarks/bench_session_load.py on the 2-core VM), but pydantic reports
each error as data (the path as a tuple, the input, a type), where msgspec gives one English sentence to parse; it
takes a validator where a rule is no range (no duration below a picosecond but 0), and writes a JSON Schema with
each field's docstring as its description (docs/session.schema.json). It was already installed with the test
tools; it is now a dependency.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import annotated_types as at
from pydantic import AfterValidator, BeforeValidator, Strict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

# Byte counts and other integers fit an int64 (larger ones overflow the float arithmetic of rates).
MAX_COUNT = 2**63 - 1
# No load lasts 30 years: larger "seconds" are corrupt, and would overflow sums into infinity. No clock resolves
# less than a picosecond: a smaller non-zero duration is corrupt too, and would overflow rates (bytes / seconds).
MAX_SECONDS = 1e9
MIN_SECONDS = 1e-12


class InvalidField(ValueError):
    """A session field with the wrong type or an impossible value; the message starts with its path."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        super().__init__(f"{where}: {problem}")


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a field holds, in the words a refusal uses ("expected a number of seconds >= 0")."""

    expected: str


COUNT = Kind("expected a whole number >= 0")
SECONDS = Kind("expected a number of seconds >= 0")
RATE = Kind("expected a number >= 0")
SIGNED = Kind("expected a number")
TEXT = Kind("expected a string")
FLAG = Kind("expected true or false")
LIST = Kind("expected a list")
OBJECT = Kind("expected an object")
FRAME = Kind("expected [frame, seconds]")
RANK_KEY = Kind("expected a rank number as the key")


def _resolution(value: float) -> float:
    if 0 < value < MIN_SECONDS:
        raise ValueError(
            "below any clock's resolution"
        )  # reworded by ``problem`` from the kind and the value
    return value


# Every int of the data model is a count (bytes, faults, a rank, a pid), every duration a number of seconds. Strict:
# a bool is no number and a string "3" no count; a whole number is a float where a float is asked for (older
# sessions wrote whole seconds as ints).
Count = Annotated[int, Strict(), at.Ge(0), at.Le(MAX_COUNT), COUNT]
Seconds = Annotated[float, Strict(), at.Ge(0), at.Le(MAX_SECONDS), AfterValidator(_resolution), SECONDS]
Rate = Annotated[float, Strict(), at.Ge(0), RATE]
"""A rate, ratio or share: a finite number >= 0."""
Signed = Annotated[float, Strict(), SIGNED]
"""A signed figure (a relative error, a delta): any finite number."""
Flag = Annotated[bool, Strict()]
Text = Annotated[str, Strict()]
RankKey = Annotated[str, at.Predicate(str.isdigit), RANK_KEY]
Frame = Annotated[tuple[Text, Seconds], FRAME]
"""A py-spy top frame: [name, seconds]."""


def _refuse_null(value: Any) -> Any:
    if value is None:
        raise ValueError("null")
    return value


def _null_as(default: Callable[[], Any]) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        return default() if value is None else value

    return run


NOT_NULL = BeforeValidator(_refuse_null)
"""On a field that may be absent (default None) but, when present, must hold a value."""
NULL_AS_EMPTY = BeforeValidator(_null_as(list))
"""A list that older sessions may write as null: read as empty."""
NULL_AS_EMPTY_OBJECT = BeforeValidator(_null_as(dict))
"""An object that older sessions may write as null: read as an empty one."""
EMPTY_AS_NONE = BeforeValidator(lambda value: value or None)
"""A record written as {} or null when there was none (a verdict before one was computed)."""


def fill(**defaults: Any) -> BeforeValidator:
    """A record whose older versions left out fields the dataclass requires: they read as ``defaults``."""

    def run(value: Any) -> Any:
        if isinstance(value, dict):
            missing = {k: v() if callable(v) else v for k, v in defaults.items() if k not in value}
            return {**missing, **value} if missing else value
        return value

    return BeforeValidator(run)


T = TypeVar("T")


@functools.cache
def adapter(tp: Any) -> TypeAdapter[Any]:
    """pydantic's validator for ``tp``, built once (building one takes milliseconds)."""
    return TypeAdapter(tp)


def decode(tp: Any, value: Any, where: str = "") -> Any:
    """``value`` (JSON as Python's json module reads it) decoded into ``tp``; InvalidField naming the first bad
    field, its path prefixed with ``where``."""
    check_finite(value, where)
    try:
        return adapter(tp).validate_python(value)
    except ValidationError as exc:
        raise refusal(tp, value, exc, where) from None


# -- the one-line refusal --------------------------------------------------------------------------------------


def describe(value: Any) -> str:
    """``value`` as the JSON it was: null, true, 1.5, the string 'x', a list, an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        return format(value, ".3g")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def check_finite(obj: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere, unknown fields too (Python's json reads NaN, Infinity and 1e999 without
    complaint)."""
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise InvalidField(where, f"not a finite number ({describe(obj)})")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_finite(v, f"{where}[{i}]")


def path(where: str, loc: Iterable[int | str]) -> str:
    """("ranks", 0, "wall_s") under "" -> "ranks[0].wall_s"."""
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else part
    return out


def refusal(tp: Any, value: Any, exc: ValidationError, where: str = "") -> InvalidField:
    """The first of pydantic's errors as InvalidField: the field's path and, in its kind's words, the problem."""
    error = exc.errors(include_url=False)[0]
    loc = list(error["loc"])
    if error["type"] == "missing":
        return InvalidField(path(where, loc[:-1]), f"missing field {loc[-1]!r}")
    if loc and loc[-1] == "[key]":  # a dict key that broke its rule (a rank number)
        mapping, _ = _strip(_declared(tp, loc[:-2]))
        key_type = get_args(mapping)[0] if get_args(mapping) else Any
        return InvalidField(path(where, loc[:-1]), _kind(key_type).expected)
    found = _value_at(value, loc)
    return InvalidField(path(where, loc), problem(_kind(_declared(tp, loc)), found))


def problem(kind: Kind, value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"not a finite number ({describe(value)})"
    if (
        kind is SECONDS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 < value < MIN_SECONDS
    ):
        return f"{describe(value)} seconds is below any clock's resolution"
    return f"{kind.expected}, got {describe(value)}"


def _value_at(value: Any, loc: list[int | str]) -> Any:
    for part in loc:
        value = value[part]
    return value


def _strip(tp: Any) -> tuple[Any, list[Any]]:
    """``tp`` without Annotated and a None arm, and the Annotated metadata found on the way."""
    metadata: list[Any] = []
    while True:
        if get_origin(tp) is Annotated:
            tp, *more = get_args(tp)
            metadata = [*more, *metadata]
        elif get_origin(tp) in (Union, types.UnionType):
            arms = [a for a in get_args(tp) if a is not type(None)]
            tp = arms[0] if len(arms) == 1 else Any
        else:
            return tp, metadata


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A record's field types by attribute, and by JSON key where that is an alias (pydantic's error paths use it)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    aliases = {
        meta.alias: hint
        for hint in hints.values()
        for meta in getattr(hint, "__metadata__", ())
        if isinstance(meta, FieldInfo) and isinstance(meta.alias, str)
    }
    return {**hints, **aliases}


def _declared(tp: Any, loc: list[int | str]) -> Any:
    """The declared type at ``loc`` under ``tp`` (a dict key's where the path ends in "[key]")."""
    for part in loc:
        tp, _ = _strip(tp)
        origin, args = get_origin(tp), get_args(tp)
        if dataclasses.is_dataclass(tp) and isinstance(part, str):
            tp = _hints(tp).get(part, Any)  # type: ignore[arg-type]
        elif origin in (list, tuple) and args:
            tp = args[0] if len(args) == 1 or args[-1] is Ellipsis else args[int(part)]
        elif origin is dict and args:
            tp = args[1]
        else:
            return Any
    return tp


def _kind(tp: Any) -> Kind:
    base, metadata = _strip(tp)
    kinds = [m for m in metadata if isinstance(m, Kind)]
    if kinds:
        return kinds[-1]
    origin = get_origin(base) or base
    if origin in (list, tuple):
        return LIST
    if origin is dict or dataclasses.is_dataclass(base):
        return OBJECT
    if base is bool:
        return FLAG
    if base is int:
        return COUNT
    if base is float:
        return SECONDS
    return TEXT


def null_as(**defaults: Any) -> BeforeValidator:
    """A record whose older versions wrote null (or nothing) where a value is now always written: it reads as
    ``defaults`` (a callable default is called: ``tuple``, ``dict``)."""

    def run(value: Any) -> Any:
        if isinstance(value, dict):
            missing = {k: v() if callable(v) else v for k, v in defaults.items() if value.get(k) is None}
            return {**value, **missing} if missing else value
        return value

    return BeforeValidator(run)
