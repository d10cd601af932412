"""`--set PATH=V1,V2` overrides: the little path language `mn-harness compare` sweeps with.

A path names a value of the experiment file as written (`jobs[0].compute`, `run.seed`,
`links[2].bw`); values are YAML scalars or flow collections (`80ms`, `3`, `true`, `[h1, h2]`).
Overrides edit the raw YAML mapping *before* validation, so every variant is validated exactly
like a file and its errors name the YAML path. Every part of a path must already exist (a typo
must not silently add a field): in the file, or among the options the file leaves at their
defaults (`known`, the complete configuration as config.yaml writes it: `run.emulation.host_queue`
can be swept without writing it into the file first; only the missing mappings are added, so
the file's other defaults stay derived as before); `create=True` allows a new last key in an
existing mapping. Errors are `ConfigError`s naming `--set`."""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

from mn_harness.errors import ConfigError

_SEGMENT = r"[A-Za-z_][\w-]*(?:\[\d+\])*"
_PATH_RE = re.compile(rf"^{_SEGMENT}(?:\.{_SEGMENT})*$")
_TOKEN_RE = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")


def _error(message: str) -> ConfigError:
    return ConfigError("--set", message)


def parse_path(path: str) -> list[str | int]:
    """`jobs[0].compute` -> ["jobs", 0, "compute"]; ConfigError naming a malformed path."""
    if not _PATH_RE.match(path):
        raise _error(f"malformed config path {path!r} (expected e.g. jobs[0].compute)")
    return [int(idx) if idx else name for name, idx in _TOKEN_RE.findall(path)]


def _split_values(text: str) -> list[str]:
    """Split on commas outside brackets/braces/quotes, so `[1,2],[3]` is two values."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    cur = ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def parse_value(text: str) -> Any:
    """A YAML scalar/flow value: `3` -> 3, `true` -> True, `80ms` -> "80ms", `[1,2]` -> list."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_set_spec(spec: str) -> list[tuple[str, Any]]:
    """`jobs[0].compute=80ms,120ms` -> [("jobs[0].compute", "80ms"), ("jobs[0].compute",
    "120ms")]. ConfigError for a spec without "=", a malformed path, or an empty value."""
    path, sep, rest = spec.partition("=")
    path = path.strip()
    if not sep:
        raise _error(f"{spec!r}: expected PATH=VALUE[,VALUE...]")
    parse_path(path)
    texts = _split_values(rest)
    if any(t == "" for t in texts):
        raise _error(f"{spec!r}: empty value for {path}")
    return [(path, parse_value(t)) for t in texts]


def expand_set_specs(specs: Sequence[str]) -> list[list[tuple[str, Any]]]:
    """Every combination (cartesian product, in spec order) of several --set specs."""
    if not specs:
        return [[]]
    choices = [parse_set_spec(s) for s in specs]
    return [list(combo) for combo in itertools.product(*choices)]


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def variant_label(assignments: Sequence[tuple[str, Any]]) -> str:
    """`jobs[0].compute=80ms` (several joined by a space); usable as a compare label."""
    return " ".join(f"{p}={format_value(v)}" for p, v in assignments)


def _walk(node: Any, tokens: Sequence[str | int], path: str) -> Any:
    walked = ""
    for tok in tokens:
        if isinstance(tok, int):
            here = f"{walked}[{tok}]"
            if not isinstance(node, list) or not 0 <= tok < len(node):
                raise _error(f"config path {path!r}: {here} does not exist")
        else:
            here = f"{walked}.{tok}" if walked else tok
            if not isinstance(node, dict) or tok not in node:
                raise _error(f"config path {path!r}: {here} does not exist")
        node = node[tok]
        walked = here
    return node


def get_path(config: Any, path: str) -> Any:
    """The value at `path`; ConfigError naming the path (and the missing part) if absent."""
    return _walk(config, parse_path(path), path)


def _graft(config: dict[str, Any], known: Any, tokens: Sequence[str | int]) -> None:
    """Add to `config` the mappings on the way to `tokens` that it lacks and `known` has (the
    last key is left to the caller: it is set, not copied)."""
    node: Any = config
    for tok in tokens[:-1]:
        if isinstance(known, dict) and isinstance(tok, str):
            known = known.get(tok)
        elif isinstance(known, list) and isinstance(tok, int) and tok < len(known):
            known = known[tok]
        else:
            return
        if isinstance(tok, str) and isinstance(node, dict) and tok not in node and isinstance(known, dict):
            node[tok] = {}
        try:
            node = node[tok]
        except (KeyError, IndexError, TypeError):
            return
    last = tokens[-1]
    if isinstance(last, str) and isinstance(node, dict) and last not in node \
            and isinstance(known, dict) and last in known:
        node[last] = copy.deepcopy(known[last])


def apply_path(config: dict[str, Any], path: str, value: Any, create: bool = False,
               known: dict[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of `config` with `path` set to `value`.

    Every part of the path must exist in `config` or in `known` (the complete configuration,
    defaults written out): a typo must not silently add a field; with create=True only the last
    key may be new, in an existing mapping."""
    tokens = parse_path(path)
    out = copy.deepcopy(config)
    if known is not None:
        _graft(out, known, tokens)
    parent = _walk(out, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(last, str) and create and isinstance(parent, dict):
        parent[last] = value
        return out
    try:
        _walk(parent, [last], path)
    except ConfigError:
        raise _error(f"config path {path!r}: {path} does not exist") from None
    parent[last] = value
    return out


def apply_variant(
    config: dict[str, Any], assignments: Sequence[tuple[str, Any]], create: bool = False,
    known: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Apply every (path, value) of a variant, in order, to a copy of `config` (`known`: as in
    apply_path)."""
    out = copy.deepcopy(config)
    for path, value in assignments:
        out = apply_path(out, path, value, create=create, known=known)
    return out
