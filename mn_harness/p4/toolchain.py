"""Find the BMv2 / p4c binaries.

They come from the p4lang packages (the Vagrant VM) or a local build under a prefix named by
the P4_TOOLCHAIN environment variable (e.g. /opt/p4local); nothing here installs them, so every
caller gets a one-line reason when they are missing."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

# simple_switch_CLI sets BMv2's egress queue depth/rate (Thrift): without it the bottleneck
# queue cannot be BMv2's own, so it is required too.
REQUIRED = ("simple_switch_grpc", "p4c-bm2-ss", "simple_switch_CLI")
OPTIONAL: tuple[str, ...] = ()
DEFAULT_PREFIXES = ("/opt/p4local", "/usr/local", "/usr")


@dataclass(frozen=True)
class Toolchain:
    paths: dict[str, str]

    @property
    def complete(self) -> bool:
        return all(name in self.paths for name in REQUIRED)

    def missing(self) -> list[str]:
        return [name for name in REQUIRED if name not in self.paths]

    def missing_reason(self) -> str:
        return (
            f"BMv2/p4c not found ({', '.join(self.missing())} missing): install the p4lang "
            "packages p4lang-bmv2 p4lang-p4c p4lang-pi (see Vagrantfile) or set "
            "P4_TOOLCHAIN to a prefix holding bin/simple_switch_grpc, bin/simple_switch_CLI and "
            "bin/p4c-bm2-ss"
        )

    def bin(self, name: str) -> str:
        return self.paths[name]


ONLY_ENV = "P4_TOOLCHAIN_ONLY"  # "1": search only $P4_TOOLCHAIN (not the defaults, not PATH)


def find_toolchain() -> Toolchain:
    """Search $P4_TOOLCHAIN, DEFAULT_PREFIXES, then PATH; with P4_TOOLCHAIN_ONLY=1 only
    $P4_TOOLCHAIN (lets tests and users pin one installation, or simulate none)."""
    only = os.environ.get(ONLY_ENV) == "1"
    prefixes = []
    if os.environ.get("P4_TOOLCHAIN"):
        prefixes.append(os.environ["P4_TOOLCHAIN"])
    if not only:
        prefixes.extend(DEFAULT_PREFIXES)
    found: dict[str, str] = {}
    for name in REQUIRED + OPTIONAL:
        for prefix in prefixes:
            candidate = Path(prefix) / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found[name] = str(candidate)
                break
        else:
            on_path = None if only else shutil.which(name)
            if on_path:
                found[name] = on_path
    return Toolchain(found)
