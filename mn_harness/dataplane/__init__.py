"""Data planes: Linux routers (default, always available) and BMv2 running our P4 programs."""

from __future__ import annotations

from mn_harness.dataplane.base import Dataplane, DataplaneError


def _bmv2_class():
    try:
        from mn_harness.dataplane.bmv2 import Bmv2Dataplane
    except ImportError:
        return None
    return Bmv2Dataplane


def select_dataplane(requested: str, log=print) -> Dataplane:
    """`linux`, `bmv2`, or `auto` (BMv2 when its binaries are installed, saying so)."""
    from mn_harness.dataplane.linux import LinuxDataplane

    bmv2 = _bmv2_class()
    if requested == "linux":
        return LinuxDataplane()
    if requested == "bmv2":
        if bmv2 is None:
            raise DataplaneError("run.dataplane: bmv2 data plane is not part of this installation yet")
        reason = bmv2.unavailable_reason()
        if reason:
            raise DataplaneError(f"run.dataplane: bmv2 unavailable: {reason}")
        return bmv2()
    if bmv2 is not None and bmv2.unavailable_reason() is None:
        log("data plane: auto -> bmv2 (BMv2 binaries found)")
        return bmv2()
    log("data plane: auto -> linux (BMv2 not installed)")
    return LinuxDataplane()


__all__ = ["Dataplane", "DataplaneError", "select_dataplane"]
