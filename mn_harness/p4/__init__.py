"""The P4 half: programs (package data in programs/), their limits (limits.py), the p4c build
(compile.py, toolchain.py), the P4Runtime client (runtime/), BMv2 processes and queues (bmv2/),
what a switch is programmed with (entries.py, aggregation.py), the one bring-up sequence that
programs it (bringup.py) and the telemetry read back (telemetry.py).

Importing this package (or `mn_harness.p4.limits`) loads nothing heavy: grpc and the P4Runtime
bindings are imported by the modules that talk to a switch."""

from __future__ import annotations

from pathlib import Path

PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
DEFAULT_PROGRAM = "ecn_telemetry"
AGGREGATION_PROGRAM = "aggregation"


def find_program(name: str | None) -> Path | None:
    """A switch's `program:` value as a file: None -> ecn_telemetry; a bare name ->
    programs/<name>.p4 shipped with the package; otherwise a path to a .p4 file. None when no
    such file exists."""
    name = name or DEFAULT_PROGRAM
    for candidate in (PROGRAMS_DIR / f"{name}.p4", Path(name)):
        if candidate.is_file():
            return candidate
    return None


def shipped_programs() -> list[str]:
    return sorted(p.stem for p in PROGRAMS_DIR.glob("*.p4"))
