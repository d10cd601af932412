"""The one reader of experiment files refuses what is not small UTF-8 YAML with a mapping on top,
in one line naming the file (ConfigError, exit 2 in the CLI)."""

import os

import pytest

from mn_harness.config import ConfigError
from mn_harness.config.loader import MAX_DEPTH, MAX_FILE_BYTES, read_experiment_file


def refused(path, words):
    with pytest.raises(ConfigError) as info:
        read_experiment_file(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert words in message, message


def test_duplicate_keys_are_refused_not_silently_merged(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("hosts: [h1]\njobs: []\nlinks: []\njobs: [x]\n")
    refused(f, "duplicate key 'jobs' (first at line 2)")


def test_duplicate_keys_nested(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("run: {seed: 1, seed: 2}\n")
    refused(f, "duplicate key 'seed'")


@pytest.mark.parametrize("data,words", [
    ("hosts: [h1]\n".encode("utf-16"), "UTF-16"),
    (b"\x89PNG\r\n\x1a\n\0\0\0", "binary"),
    (b"hosts: [h\xe9]\n", "not UTF-8"),
    (b"", "empty"),
    (b"- a\n- b\n", "expected a mapping"),
    (b"just a string\n", "expected a mapping"),
    (b"hosts: [h1\n", "not valid YAML at line"),
    (b"a: *nope\n", "not valid YAML"),
])
def test_bad_contents(tmp_path, data, words):
    f = tmp_path / "x.yaml"
    f.write_bytes(data)
    refused(f, words)


def test_deep_nesting_is_refused_without_recursion_error(tmp_path):
    f = tmp_path / "deep.yaml"
    f.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    refused(f, f"nested deeper than {MAX_DEPTH}")


def test_alias_bomb_is_refused(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    refused(f, "alias")


def test_large_file_is_refused(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    refused(f, "larger than")


def test_fifo_and_devices_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    refused(fifo, "not a regular file")
    refused("/dev/zero", "not a regular file")
    refused(tmp_path, "is a directory")
    refused(tmp_path / "missing.yaml", "cannot read: No such file or directory")
