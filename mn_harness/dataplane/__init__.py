"""Data planes: Linux routers (default, always available) and BMv2 running our P4 programs.

Importing this package loads neither Mininet nor grpc: the data planes themselves are imported
when one is selected."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mn_harness.dataplane.errors import DataplaneError

if TYPE_CHECKING:
    from mn_harness.dataplane.base import Dataplane



def _bmv2_class():
    try:
        from mn_harness.dataplane.bmv2 import Bmv2Dataplane
    except ImportError:
        return None
    return Bmv2Dataplane


def bmv2_unavailable_reason() -> str | None:
    """None when the BMv2 data plane can run here, else one line saying what to install."""
    bmv2 = _bmv2_class()
    if bmv2 is None:
        return "the bmv2 data plane needs grpcio, protobuf and p4runtime (pip install mn-harness)"
    return bmv2.unavailable_reason()


def select_dataplane(requested: str, log=print) -> Dataplane:
    """`linux`, `bmv2`, or `auto` (BMv2 when its binaries are installed, saying so)."""
    from mn_harness.dataplane.linux import LinuxDataplane

    if requested == "linux":
        return LinuxDataplane(log=log)
    reason = bmv2_unavailable_reason()
    if requested == "bmv2":
        if reason:
            raise DataplaneError(f"run.dataplane: bmv2 unavailable: {reason}")
        return _bmv2_class()()
    if reason is None:
        log("data plane: auto -> bmv2 (BMv2 binaries found)")
        return _bmv2_class()()
    log("data plane: auto -> linux (BMv2 not installed)")
    return LinuxDataplane(log=log)


__all__ = ["DataplaneError", "bmv2_unavailable_reason", "select_dataplane"]
