"""A comparison split into rounds that run anywhere, and merged back into one.

A comparison (mn_harness.sweep) is a plan of runs: every CC × `--set` variant × repetition.
Planned into rounds, each round holds every CC of one variant and one repetition, so the CCs a
gain compares always ran as neighbours, on one machine, under the same conditions: gains stay
paired whichever machine ran which round. The comparison folder then also holds `rounds.json`
(the plan's id, the project's version and package digest, the rounds and their runs) and
`rounds.txt` (the round names, one a line: what GNU parallel or a Slurm array reads).

    mn-harness compare x.yaml --cc reno,mltcp-reno --repeat 8 --rounds   # plans, runs nothing
    mn-harness compare --round DIR r003     # on any machine with the project and DIR
    mn-harness compare --merge DIR [ROUND_FOLDER ...]

A round writes `DIR/rounds/<name>/`: its runs and `round.json` (the plan's id, the version, its
runs and their status). Running a round again (it failed, a machine died) replaces that folder
and nothing else. Merging takes `DIR/rounds/*` and any round folders named on the command line
(copied back from other machines), refuses a round of another plan, of another version of the
project, or one that did not complete, says which rounds are missing, and otherwise fills the
plan with every run's folder and writes the comparison exactly as `compare` would have."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mn_harness.cluster.version import identity
from mn_harness.config.loader import read_json_file
from mn_harness.config.overrides import variant_label
from mn_harness.errors import ConfigError, RunError, shown
from mn_harness.ownership import hand_over
from mn_harness.sweep import Sweep, load_sweep

ROUNDS_FILE = "rounds.json"
ROUND_NAMES = "rounds.txt"
ROUND_FILE = "round.json"
ROUNDS_DIR = "rounds"


def plan_rounds(runs: Sequence[dict]) -> dict[str, list[int]]:
    """Round name -> the plan's run indices: one round per (variant, repetition), every CC in it,
    in repetition order (`r001`, `r002`, ... ; `r001-v2` for the second variant of a sweep
    with several)."""
    variants: list[str] = []
    groups: dict[tuple[int, int], list[int]] = {}
    for i, entry in enumerate(runs):
        label = variant_label(entry["set"]) if entry["set"] else ""
        if label not in variants:
            variants.append(label)
        groups.setdefault((entry["repetition"], variants.index(label)), []).append(i)
    several = len(variants) > 1
    return {f"r{rep + 1:03d}" + (f"-v{v + 1}" if several else ""): idx
            for (rep, v), idx in sorted(groups.items())}


def write_rounds(sweep: Sweep) -> dict[str, list[int]]:
    """rounds.json and rounds.txt beside the plan; the rounds."""
    rounds = plan_rounds(sweep.runs)
    data = {"plan_id": secrets.token_hex(8), **identity(), "rounds": rounds}
    (sweep.folder / ROUNDS_FILE).write_text(json.dumps(data, indent=1))
    (sweep.folder / ROUND_NAMES).write_text("".join(f"{name}\n" for name in rounds))
    return rounds


def load_rounds(folder: Path) -> dict[str, Any]:
    path = folder / ROUNDS_FILE
    where = shown(str(path))
    if not os.path.lexists(path):
        raise ConfigError(shown(str(folder)), f"no {ROUNDS_FILE}: not a comparison planned into rounds "
                                              "(plan one with `compare FILE ... --rounds`)")
    data = read_json_file(path, "a comparison's rounds")
    if (not isinstance(data, dict) or not isinstance(data.get("rounds"), dict)
            or not all(isinstance(k, str) and isinstance(v, list) for k, v in data["rounds"].items())
            or not isinstance(data.get("plan_id"), str)):
        raise ConfigError(where, "not a rounds file (needs plan_id and rounds)")
    return data


def _check_version(what: str, found: dict) -> None:
    mine = identity()
    if (found.get("version"), found.get("digest")) != (mine["version"], mine["digest"]):
        raise ConfigError(what, f"made by mn-harness {found.get('version')} (files {found.get('digest')}); this is "
                                f"{mine['version']} (files {mine['digest']}): every round needs the version the "
                                "comparison was planned with")


def run_round(folder: Path, name: str, run_one: Callable[[Any, Path, Callable[[Path], None]], None],
              log: Callable[[str], None] = print) -> Path:
    """Run round `name` of the comparison in `folder` into `folder/rounds/<name>/` (replacing a
    previous attempt once this one has started cleanly); its folder."""
    sweep = load_sweep(folder)
    data = load_rounds(folder)
    _check_version(shown(str(folder / ROUNDS_FILE)), data)
    if name not in data["rounds"]:
        raise ConfigError("--round", f"no round {name!r} in {folder} (rounds: {', '.join(data['rounds'])})")
    indices = [int(i) for i in data["rounds"][name]]
    experiments = sweep.experiments()  # every run valid with this version, before anything runs
    target = folder / ROUNDS_DIR / name
    if target.exists():
        log(f"round {name}: replacing the earlier attempt in {target}")
        shutil.rmtree(target)
    target.mkdir(parents=True)
    record: dict[str, Any] = {"plan_id": data["plan_id"], "round": name, **identity(), "status": "running",
                              "runs": []}

    def save() -> None:
        (target / ROUND_FILE).write_text(json.dumps(record, indent=1))

    save()
    try:
        for k, i in enumerate(indices):
            entry = sweep.runs[i]
            log(f"== round {name}: run {k + 1}/{len(indices)}: {entry['label']} (repetition {entry['repetition'] + 1})")
            run = {"index": i, "label": entry["label"], "repetition": entry["repetition"], "results_dir": None}
            record["runs"].append(run)

            def done(results_dir: Path, run: dict = run) -> None:
                run["results_dir"] = os.path.relpath(results_dir, target)
                save()

            run_one(experiments[i], target / "runs", done)
        record["status"] = "completed"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
        raise
    except Exception as exc:
        record["status"] = f"failed: {exc}"
        raise
    finally:
        save()
        hand_over(folder / ROUNDS_DIR)
    return target


def merge_rounds(folder: Path, extra: Sequence[Path] = ()) -> Sweep:
    """Every round of the comparison in `folder` (its rounds/ and the folders `extra` names)
    checked and put into its plan; the sweep, ready for report.compare (module docstring)."""
    sweep = load_sweep(folder)
    data = load_rounds(folder)
    _check_version(shown(str(folder / ROUNDS_FILE)), data)
    found: dict[str, Path] = {}
    for path in [*sorted((folder / ROUNDS_DIR).glob("*")), *extra]:
        if not (path / ROUND_FILE).is_file():
            if path in extra:
                raise ConfigError(shown(str(path)), f"no {ROUND_FILE}: not a round folder")
            continue
        record = read_json_file(path / ROUND_FILE, "a round")
        where = shown(str(path / ROUND_FILE))
        if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
            raise ConfigError(where, "not a round (needs plan_id, round and runs)")
        if record.get("plan_id") != data["plan_id"]:
            raise ConfigError(where, f"a round of another plan ({record.get('plan_id')}, this comparison's is "
                                     f"{data['plan_id']})")
        _check_version(where, record)
        name = str(record.get("round"))
        if name not in data["rounds"]:
            raise ConfigError(where, f"round {name!r} is not one of this plan's")
        if record.get("status") != "completed":
            raise ConfigError(where, f"round {name} did not complete ({record.get('status')}): run it again with "
                                     f"`mn-harness compare --round {folder} {name}`")
        found[name] = path
    missing = [name for name in data["rounds"] if name not in found]
    if missing:
        raise RunError(f"{len(missing)} of {len(data['rounds'])} rounds missing ({', '.join(missing)}): run each "
                       f"with `mn-harness compare --round {folder} NAME`, or name the folders they wrote")
    for name, path in found.items():
        home = folder / ROUNDS_DIR / name
        if path.resolve() != home.resolve():  # brought back from another machine: kept with the plan
            if home.exists():
                shutil.rmtree(home)
            shutil.copytree(path, home)
        record = json.loads((home / ROUND_FILE).read_text())
        for run in record["runs"]:
            entry = sweep.runs[int(run["index"])]
            if (entry["label"], entry["repetition"]) != (run["label"], run["repetition"]):
                raise ConfigError(shown(str(home / ROUND_FILE)), f"run {run['index']} is {run['label']!r} "
                                  f"#{run['repetition']}, the plan says {entry['label']!r} #{entry['repetition']}")
            entry["results_dir"] = str((home / run["results_dir"]).resolve())
    sweep.save()
    hand_over(folder)
    return sweep
