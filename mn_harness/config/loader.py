"""The one reader of experiment files: every command (validate, run, compare) goes through it;
the JSON files of a results or comparison folder (summary.json, plan.json) are read by the same
rules (`read_json_file`).

An experiment file is small UTF-8 YAML with a mapping at the top. Anything else is refused in
one line naming the file, before any YAML is built: not a regular file (a FIFO would block, a
device could be endless), more than MAX_FILE_BYTES, not UTF-8 (UTF-16, binary), YAML that does
not parse, a key given twice in one mapping (YAML would silently keep the last one: two `jobs:`
keys would become one job), nesting deeper than MAX_DEPTH, or more than MAX_ALIASES alias uses
or more than MAX_NODES values once aliases are expanded (an alias bomb)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from mn_harness.errors import ConfigError, one_line, shown

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 1000
MAX_NODES = 200_000  # values in the document with every alias expanded
MAX_JSON_BYTES = 64 << 20  # summary.json, plan.json: written by the harness, large runs included


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, deep nesting and alias bombs."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} alias uses")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.MarkedYAMLError(problem=f"nested deeper than {MAX_DEPTH} levels",
                                           problem_mark=mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node, deep=False):
        # PyYAML's own constructors raise ValueError for a 5000-digit integer (Python's
        # int-to-string limit) or an impossible date (`2020-13-45`): a YAML error here too
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(None, None, one_line(exc), node.start_mark) from None

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_NODES:
            raise yaml.YAMLError(f"more than {MAX_NODES} values once aliases are expanded")
        return node

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node, memo: dict[int, int]) -> int:
    """Values in `node` with aliases expanded (an alias is the very node it names: memoised)."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = size
    return size


def parse_yaml(text: str, where: str) -> Any:
    """YAML text -> Python objects with the strict rules above; ConfigError naming `where`."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(where, f"not valid YAML{at}: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(where, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(where, f"not valid YAML: nested deeper than {MAX_DEPTH} levels") from None


def read_file_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most max_bytes (never a FIFO, which would block, nor a
    device such as /dev/zero, which never ends); ConfigError naming the file otherwise."""
    where = shown(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(where, f"cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(where, f"is a directory, not {what}")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(where, f"not a regular file (a pipe or device cannot be {what})")
        if info.st_size > max_bytes:
            raise ConfigError(where, f"{info.st_size} bytes: larger than the {max_bytes // 1024} KiB "
                                     f"{what} may have")
        chunks = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > max_bytes:
                raise ConfigError(where, f"larger than the {max_bytes // 1024} KiB {what} may have")
            chunks.append(chunk)
    except OSError as exc:
        raise ConfigError(where, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text_file(path: str | Path, what: str = "an experiment file",
                   max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a small regular file; ConfigError naming the file otherwise."""
    where = shown(str(path))
    data = read_file_bytes(path, what, max_bytes)
    if data.startswith((b"\xff\xfe\0\0", b"\0\0\xfe\xff")):
        raise ConfigError(where, "is UTF-32 text; save it as UTF-8")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(where, "is UTF-16 text; save it as UTF-8")
    if b"\0" in data:
        raise ConfigError(where, f"is a binary file, not {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(where, f"not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def read_experiment_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of an experiment file (not yet validated)."""
    where = shown(str(path))
    raw = parse_yaml(read_text_file(path), where)
    if raw is None:
        raise ConfigError(where, "file is empty")
    if not isinstance(raw, dict):
        raise ConfigError(where, f"expected a mapping of keys (experiment, hosts, links, jobs ...) "
                                 f"at the top, got {type(raw).__name__}")
    return raw


def parse_json(text: str, where: str) -> Any:
    """JSON text -> Python objects; a key given twice in one object is refused (JSON would keep
    the last one silently); ConfigError naming `where`."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(where, f"not valid JSON: duplicate key {key!r}")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise ConfigError(where, f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(where, "not valid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise ConfigError(where, f"not valid JSON: {one_line(exc)}") from None


def read_json_file(path: str | Path, what: str) -> Any:
    """A JSON file the harness wrote (summary.json, plan.json), read like an experiment file:
    a small regular UTF-8 file, or ConfigError naming it."""
    return parse_json(read_text_file(path, what, MAX_JSON_BYTES), shown(str(path)))


def default_name(path: str | Path) -> str:
    """An experiment's name when the file gives none: the file name without .yaml."""
    return Path(path).stem
