"""The servers' parts of a run merged into one results folder, as if one machine had run it.

Each server's folder is unpacked under `servers/<name>/` of the run's folder and stays there
(its harness.log, cpu.csv, queue.csv as it wrote them). From them:

- `raw/`: every worker's lines, the times of each server's put on the head's clock (its
  offset's drift over the run, mn_harness.cluster.clock); iterations.csv, phases.csv and
  throughput.csv are then made from it as on one machine;
- `queue.csv`: every server's rows, by time;
- `cc_telemetry.csv`: the rows of every kernel's congestion controls;
- summary.json: `tcp_counters` over every host; `link_stats`, `queue`, `ecn` thresholds of every
  server's ports; `ecn_marks` summed; `cpu_load` of the busiest server, with every server's under
  `servers`; `fidelity` over all: every server's links and host (`fidelity.servers`), the
  workers' invariant from the merged rows, each server's clock as its own invariant, and one
  verdict (`faithful` only when every server's checks ran and held)."""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import shutil
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mn_harness.cluster.clock import ClockTrack, correct_file
from mn_harness.config import Experiment
from mn_harness.config.fidelity import FidelityThresholds
from mn_harness.errors import RunError
from mn_harness.fidelity.verdict import worker_violations
from mn_harness.fidelity.workers import workers_summary
from mn_harness.network import tcp_counters
from mn_harness.results import records
from mn_harness.results.schema import PhaseRow
from mn_harness.results.schema_fidelity import (
    FAITHFUL,
    UNCHECKED,
    UNFAITHFUL,
    Fidelity,
    FidelityClock,
    FidelityServer,
    FidelityViolation,
)

SERVERS_DIR = "servers"


def unpack(tar_b64: str, dest: Path) -> None:
    """A server's folder into `dest`: regular files and folders only, nothing outside it."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(tar_b64)), mode="r:gz") as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            if path.is_absolute() or ".." in path.parts or not (member.isfile() or member.isdir()):
                raise RunError(f"a server's results hold {member.name!r}: not a file of a results folder")
            target = dest / path
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with source, open(target, "wb") as fh:
                shutil.copyfileobj(source, fh)


def merge_raw(parts: Mapping[str, Path], raw_dir: Path, clocks: Mapping[str, ClockTrack], t0_head: float) -> None:
    raw_dir.mkdir(parents=True, exist_ok=True)
    for server, folder in parts.items():
        for path in sorted((folder / "raw").glob("*")):
            if not path.is_file():
                continue
            target = raw_dir / path.name
            shutil.copyfile(path, target)
            if path.name.endswith(".iterations.jsonl") and server in clocks:
                correct_file(target, clocks[server], t0_head)


def merge_queue_csv(parts: Mapping[str, Path], results_dir: Path) -> None:
    header: list[str] | None = None
    rows: list[list[str]] = []
    for folder in parts.values():
        path = folder / "queue.csv"
        if not path.is_file():
            continue
        with open(path, newline="") as fh:
            reader = csv.reader(fh)
            head = next(reader, None)
            if head is None:
                continue
            header = header or head
            if head != header:
                continue  # not this run's columns: left in the server's folder
            rows.extend(r for r in reader if r)
    if header is None:
        return
    t = header.index("t")
    rows.sort(key=lambda r: float(r[t]))
    with open(results_dir / "queue.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def merge_facts(experiment: Experiment, parts: Mapping[str, dict]) -> dict[str, Any]:
    """summary.json's fields measured on the servers (RunFacts), merged."""
    out: dict[str, Any] = {}
    before: dict = {}
    after: dict = {}
    for facts in parts.values():
        counters = facts.get("tcp_counters") or {}
        before.update(counters.get("before") or {})
        after.update(counters.get("after") or {})
    if after:
        out["tcp_counters"] = tcp_counters.summary(experiment, before, after)
    loads = {name: f["cpu_load"] for name, f in parts.items() if isinstance(f.get("cpu_load"), dict)}
    if loads:
        busiest = max(loads, key=lambda n: loads[n].get("busy_mean") or 0.0)
        out["cpu_load"] = {**loads[busiest], "server": busiest, "servers": loads}
    stats = {k: v for f in parts.values() for k, v in (f.get("link_stats") or {}).items() if k != "error"}
    if stats:
        out["link_stats"] = stats
    queue = {k: v for f in parts.values() for k, v in (f.get("queue") or {}).items()}
    if queue:
        out["queue"] = queue
    marks: dict[str, int] = {}
    for f in parts.values():
        for job, n in (f.get("ecn_marks") or {}).items():
            marks[job] = marks.get(job, 0) + int(n)
    if marks:
        out["ecn_marks"] = marks
    telemetry = {name: f["telemetry"] for name, f in parts.items() if isinstance(f.get("telemetry"), dict)}
    if telemetry:
        out["telemetry"] = {"samples": sum(t.get("samples") or 0 for t in telemetry.values()),
                            "samples_per_s": min(t.get("samples_per_s") or 0.0 for t in telemetry.values()),
                            "servers": telemetry}
    ecn = [f["ecn"] for f in parts.values() if isinstance(f.get("ecn"), dict)]
    if ecn:
        methods = sorted({e.get("method") for e in ecn if e.get("method")})
        out["ecn"] = {"method": methods[0] if len(methods) == 1 else ", ".join(methods),
                      "thresholds": {k: v for e in ecn for k, v in (e.get("thresholds") or {}).items()}}
    return out


def clock_record(track: ClockTrack, limit_s: float | None) -> FidelityClock:
    after = track.after
    return FidelityClock(
        offset_before_ms=round(track.before.offset_s * 1e3, 4), error_before_ms=round(track.before.error_s * 1e3, 4),
        offset_after_ms=None if after is None else round(after.offset_s * 1e3, 4),
        error_after_ms=None if after is None else round(after.error_s * 1e3, 4),
        drift_ppm=round(track.drift * 1e6, 3), error_ms=round(track.error_s * 1e3, 4),
        limit_ms=None if limit_s is None else round(limit_s * 1e3, 4))


def clock_limit_s(t: FidelityThresholds, iteration_means: Sequence[float]) -> float | None:
    """`run.fidelity.clock_error` of the shortest mean iteration (None: no iteration measured)."""
    means = [m for m in iteration_means if m and m > 0]
    return t.clock_error * min(means) if means else None


def merge_fidelity(t: FidelityThresholds, parts: Mapping[str, dict], clocks: Mapping[str, ClockTrack],
                   iteration_means: Sequence[float], rows: Sequence[Any], phases: Sequence[PhaseRow],
                   missing: Sequence[str] = ()) -> Fidelity:
    """One verdict over every server's checks (the module docstring); `missing`: servers whose
    part never came back (their checks count as not run)."""
    if not t.enabled:
        return Fidelity(verdict=UNCHECKED, reason="run.fidelity is off", thresholds=t.as_dict())
    blocks = {name: records.from_json(Fidelity, f["fidelity"], name) for name, f in parts.items()
              if isinstance(f.get("fidelity"), dict)}
    violations: list[FidelityViolation] = []
    unchecked: list[str] = [f"server {n}: its checks never came back" for n in missing]
    links = {}
    servers: dict[str, FidelityServer] = {}
    limit = clock_limit_s(t, iteration_means)
    for name in sorted(set(blocks) | set(clocks)):
        block = blocks.get(name)
        if block is not None:
            links.update(block.links)
            for v in block.violations:
                where = v.where if v.invariant == "link" else f"server {name}: {v.where}"
                text = v.text if v.invariant == "link" else f"server {name}: {v.text}"
                violations.append(dataclasses.replace(v, where=where, text=text))
            if block.link_monitor != "on":
                unchecked.append(f"server {name}: link monitor {block.link_monitor}")
        elif name not in missing:
            unchecked.append(f"server {name}: no checks")
        track = clocks.get(name)
        clock = clock_record(track, limit) if track is not None else None
        if track is not None and limit is not None and track.error_s > limit:
            violations.append(FidelityViolation(
                "clock", f"server {name}", round(track.error_s * 1e3, 4), round(limit * 1e3, 4),
                f"server {name}: its clock is known to ±{track.error_s * 1e3:.3g} ms, more than "
                f"{t.clock_error:.0%} of the shortest mean iteration ({limit * 1e3:.3g} ms): times across "
                "servers cannot be compared that finely"))
        servers[name] = FidelityServer(link_monitor=block.link_monitor if block else None,
                                       links=sorted(block.links) if block else [],
                                       host=block.host if block else None, clock=clock)
    workers = workers_summary(phases, rows)
    violations += worker_violations(workers, t)
    if violations:
        verdict, reason = UNFAITHFUL, violations[0].text
    elif unchecked:
        verdict, reason = UNCHECKED, "; ".join(unchecked)
    else:
        verdict, reason = FAITHFUL, None
    hosts = [b.host for b in blocks.values() if b.host is not None]
    cpu = [b.monitor_cpu_s for b in blocks.values() if b.monitor_cpu_s is not None]
    kernel = [b.monitor_kernel_s for b in blocks.values() if b.monitor_kernel_s is not None]
    return Fidelity(verdict=verdict, reason=reason, violations=violations, thresholds=t.as_dict(),
                    links=dict(sorted(links.items())),
                    link_monitor="on" if not unchecked else "; ".join(unchecked),
                    host=max(hosts, key=lambda h: h.all_saturated_share or 0.0) if hosts else None,
                    workers=workers, monitor_cpu_s=round(sum(cpu), 4) if cpu else None,
                    monitor_kernel_s=round(sum(kernel), 4) if kernel else None, servers=servers)
