"""Typed JSON records: how summary.json's schema (results.schema) is written, read and documented.

A record is a frozen dataclass whose every field is declared with `entry(...)`: the field's type
is the JSON it holds and its text says what it means. One declaration thus serves the writer
(`to_json`), the reader (`from_json`) and the documentation (`describe`, docs/results.md's
table), so they cannot drift apart: a new field, or a new nested record, is one declaration.
`old` names the key older files used for a field (read, never written); `optional` leaves the
key out of the file while the value is None (keys only some runs have, e.g. `label`). A record
may extend another: its own keys come first in the file and the table, then the inherited ones.

Reading is lenient where a report on a killed or older run needs it: a missing key is the
field's default, and so is a field whose value is not of its type (a string where a number
belongs). A value of the wrong shape where the structure depends on it (an object that is a
list, an element of a list or object that is not of its type) is a ConfigError naming the
file and the key. Keys a record does not declare are kept in its `extra` field, when it has
one, and written back, so rewriting a newer file keeps what this version does not know."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from mn_harness.errors import ConfigError, shown

EXTRA = "extra"  # the field of a record that keeps the keys it does not declare
R = TypeVar("R")
_DEFAULT: Any = object()  # "leave the field at its default"


def entry(text: str, default: Any = None, *, factory: Callable[[], Any] | None = None,
          old: str | None = None, optional: bool = False, keys: str | None = None,
          absent: Any = _DEFAULT) -> Any:
    """A documented field. `keys` names what an object's keys are (e.g. "job": shown as
    `jobs.<job>.…` in the docs); `absent` is the value when a file lacks the key (else the
    default)."""
    meta = {"doc": text, "old": old, "optional": optional, "keys": keys, "absent": absent}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def extra() -> Any:
    """The field that keeps undeclared keys (not a key itself)."""
    return dataclasses.field(default_factory=dict, compare=False, repr=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _declared(cls: type) -> list[dataclasses.Field]:
    """The declared fields, a record's own first, then those it inherits (so the keys a
    subclass adds lead its file and its table)."""
    by_name = {f.name: f for f in dataclasses.fields(cls) if f.name != EXTRA}
    order = dict.fromkeys(name for klass in cls.__mro__ for name in klass.__dict__.get("__annotations__", {}))
    return [by_name[name] for name in order if name in by_name]


# -- writing -----------------------------------------------------------------------------------

def to_json(record: Any) -> dict[str, Any]:
    """The record as JSON data: declared fields in order (optional ones only when set), then
    the undeclared keys it was read with."""
    out = {f.name: _plain(getattr(record, f.name)) for f in _declared(type(record))
           if not (f.metadata["optional"] and getattr(record, f.name) is None)}
    for key, value in getattr(record, EXTRA, {}).items():
        out.setdefault(key, value)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, Mapping):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# -- reading -----------------------------------------------------------------------------------

def from_json(cls: type[R], raw: Any, where: str, path: str = "") -> R:
    """The record `cls` from JSON data; `where` (the file) and `path` (the key) name a value of
    the wrong shape in the ConfigError."""
    if not isinstance(raw, dict):
        got = f"expected an object, got {_what(raw)}"
        raise ConfigError(where, f"{path}: {got}" if path else got.replace("an object", "a JSON object"))
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable
    values: dict[str, Any] = {}
    known: set[str] = set()
    for f in _declared(cls):
        old = f.metadata["old"]
        known.update(k for k in (f.name, old) if k)
        key = f.name if f.name in raw else old if old in raw else None
        value = f.metadata["absent"] if key is None else \
            _read(hints[f.name], raw[key], where, f"{path}.{shown(key)}" if path else shown(key), True)
        if value is not _DEFAULT:
            values[f.name] = value
    if any(f.name == EXTRA for f in dataclasses.fields(cls)):  # type: ignore[arg-type]
        values[EXTRA] = {k: v for k, v in raw.items() if k not in known}
    return cls(**values)


def _read(tp: Any, value: Any, where: str, path: str, lenient: bool) -> Any:
    """`value` as type `tp`. `lenient` (a record's own field): a scalar that does not fit is the
    field's default; elsewhere it is an error like any value of the wrong shape."""
    if tp is Any:
        return value
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _read(inner, value, where, path, lenient)
    if value is None and lenient:
        return _DEFAULT
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value, where, path)  # type: ignore[arg-type]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(where, f"{path}: expected an object, got {_what(value)}")
        return {str(k): _read(args[1], v, where, f"{path}.{shown(k)}", False) for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(where, f"{path}: expected an array, got {_what(value)}")
        return [_read(args[0], v, where, f"{path}[{i}]", False) for i, v in enumerate(value)]
    try:
        return _scalar(tp, value)
    except (TypeError, ValueError, OverflowError):
        if lenient:
            return _DEFAULT
        raise ConfigError(where, f"{path}: expected {_type_text(tp)}, got {_what(value)}") from None


def _scalar(tp: Any, value: Any) -> Any:
    if isinstance(value, dict | list):
        raise TypeError(value)
    if tp is str:
        return value if isinstance(value, str) else str(value)
    if isinstance(value, bool) != (tp is bool):
        raise TypeError(value)
    if tp is bool:
        return value
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    if tp is int:
        if not isinstance(value, int) and not number.is_integer():
            raise ValueError(value)
        return value if isinstance(value, int) else int(number)
    return number if not isinstance(value, int | float) else value


def _what(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- documenting -------------------------------------------------------------------------------

_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_text(tp: Any, keys: str | None = None) -> str:
    """`tp` in JSON terms: `number or null`, `[integer]`, `{job: number}` (`keys` names an
    object's keys), `object`."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a, keys) for a in args if a is not type(None)) + " or null"
    if origin is list:
        return f"[{_type_text(args[0])}]"
    if origin is dict:
        return "object" if args[1] is Any else f"{{{keys or 'string'}: {_type_text(args[1])}}}"
    if dataclasses.is_dataclass(tp):
        return "object"
    return _NAMES.get(tp, "any")


def _record_in(tp: Any) -> tuple[Any, str]:
    """The record a field holds (directly, or in a list, an object or null) and the key suffix
    that reaches it: "" for a record, "[]" for a list of them, "." + keys for an object's."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _record_in(next(a for a in args if a is not type(None)))
    if origin is list:
        inner, suffix = _record_in(args[0])
        return inner, "[]" + suffix
    if origin is dict:
        inner, suffix = _record_in(args[1])
        return inner, ".<key>" + suffix
    return (tp, "") if dataclasses.is_dataclass(tp) else (None, "")


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, JSON type, meaning) of every field of `cls` and of the records inside it, in
    declaration order: the rows of the docs' table."""
    rows = []
    for f in _declared(cls):
        tp = _hints(cls)[f.name]
        key = prefix + f.name
        text = f.metadata["doc"]
        if f.metadata["old"]:
            text += f" (older files: `{f.metadata['old']}`)"
        kind = _type_text(tp, f.metadata["keys"])
        if f.metadata["optional"]:  # never written as null
            kind = kind.removesuffix(" or null") + " or absent"
        rows.append((key, kind, text))
        inner, suffix = _record_in(tp)
        if inner is not None:
            rows += describe(inner, key + suffix.replace("<key>", f"<{f.metadata['keys'] or 'key'}>") + ".")
    return rows


def markdown(cls: type) -> str:
    """describe(cls) as a Markdown table."""
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| key | type | meaning |", "|---|---|---|"]
    lines += [f"| `{key}` | `{kind}` | {cell(text)} |" for key, kind, text in describe(cls)]
    return "\n".join(lines)
