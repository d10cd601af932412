"""Data planes: Linux routers (default, always available) and BMv2 running our P4 programs.

Importing this package loads neither Mininet nor grpc: the data planes themselves are imported
when one is selected."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mn_harness.dataplane.errors import DataplaneError

if TYPE_CHECKING:
    from mn_harness.config import Experiment
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


# The fastest link the BMv2 data plane carries at its configured rate on the project's 2-core VM
# (bench/bmv2_throughput.py: one switch holds 0.96 of 200 Mbit/s, three in a row 0.84-0.90 of
# 100-200 Mbit/s; docs/p4.md#tests-and-benchmark). `auto` never picks BMv2 above it.
BMV2_FAITHFUL_LINK_BPS = 100e6


def needs_bmv2(experiment: Experiment) -> str | None:
    """The YAML path that asks for a P4 program (a switch's `program`, an in-network
    aggregation job), or None when the Linux routers can run the experiment."""
    for i, switch in enumerate(experiment.switches):
        if switch.program is not None:
            return f"switches[{i}].program"
    for i, job in enumerate(experiment.jobs):
        if job.collective == "inc_allreduce":
            return f"jobs[{i}].collective"
    return None


def fastest_link(experiment: Experiment) -> tuple[str, float]:
    """(YAML path, bit/s) of the experiment's fastest link."""
    i, link = max(enumerate(experiment.links), key=lambda il: il[1].bw_bps)
    return f"links[{i}].bw", link.bw_bps


def select_dataplane(requested: str, log=print, experiment: Experiment | None = None) -> Dataplane:
    """`linux`, `bmv2`, or `auto`: the Linux routers, unless the experiment needs a P4 program;
    then BMv2, if it is installed and can carry the experiment's links at their rate here
    (BMV2_FAITHFUL_LINK_BPS), else one line saying why not."""
    def linux() -> Dataplane:  # routers, or the bridges of run.emulation.switches
        if experiment is not None and experiment.run.emulation.switches == "bridge":
            from mn_harness.dataplane.bridge import LinuxBridgeDataplane

            return LinuxBridgeDataplane(log=log)
        from mn_harness.dataplane.linux import LinuxDataplane

        return LinuxDataplane(log=log)

    if requested == "linux":
        return linux()
    reason = bmv2_unavailable_reason()
    if requested == "bmv2":
        if reason:
            raise DataplaneError(f"run.dataplane: bmv2 unavailable: {reason}")
        return _bmv2_class()()
    wanted = needs_bmv2(experiment) if experiment is not None else None
    if wanted is None:
        log("data plane: auto -> linux" + (" (BMv2 is installed; auto picks it only for an experiment "
                                           "that needs a P4 program)" if reason is None else ""))
        return linux()
    if reason:
        raise DataplaneError(f"run.dataplane: auto: {wanted} needs the bmv2 data plane, which is "
                             f"unavailable: {reason}")
    assert experiment is not None
    where, bps = fastest_link(experiment)
    if bps > BMV2_FAITHFUL_LINK_BPS:
        raise DataplaneError(
            f"run.dataplane: auto: {wanted} needs the bmv2 data plane, which cannot carry {where} "
            f"({bps / 1e6:g} Mbit/s) at its rate on this machine (at most "
            f"{BMV2_FAITHFUL_LINK_BPS / 1e6:g} Mbit/s per link): lower the rate, or set "
            "run.dataplane: bmv2 to run it anyway")
    log(f"data plane: auto -> bmv2 ({wanted} needs a P4 program)")
    return _bmv2_class()()


__all__ = ["BMV2_FAITHFUL_LINK_BPS", "DataplaneError", "bmv2_unavailable_reason", "needs_bmv2",
           "select_dataplane"]
