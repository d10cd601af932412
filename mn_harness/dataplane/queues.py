"""Which egress queues a data plane marks and samples, from the config and the plan: the one
place both data planes (Linux routers, BMv2) ask, so a port gets the same threshold and the same
telemetry whichever runs it.

* A switch egress port's ECN threshold: its link's `ecn_threshold`, else its switch's, else
  DEFAULT_ECN_THRESHOLD (20 packets). Host egress queues never mark (hosts are not switches).
* The sampled ports: `run.queue_telemetry` (config/ecn.py): every switch egress port by default,
  or the named link directions (which may include host ends on the Linux data plane).
* Job ids per host address, for per-job bytes and marks (`Experiment.job_ids`: 1, 2, ... in job
  order; each host runs at most one job)."""

from __future__ import annotations

from mn_harness.config.ecn import DEFAULT_ECN_THRESHOLD, EcnThreshold, queue_telemetry_directions
from mn_harness.network.plan import Interface, NetworkPlan


def link_label(intf: Interface) -> str:
    """The directed link an egress interface feeds, e.g. 's1->s2' (summary.json's labels)."""
    return f"{intf.node}->{intf.peer_node}"


def port_threshold(plan: NetworkPlan, intf: Interface) -> EcnThreshold:
    """The marking threshold of `intf`'s egress queue (off for host interfaces)."""
    switches = {s.name: s for s in plan.experiment.switches}
    switch = switches.get(intf.node)
    if switch is None:
        return EcnThreshold()
    for value in (intf.link.ecn_threshold, switch.ecn_threshold):
        if value is not None:
            return value
    return DEFAULT_ECN_THRESHOLD


def switch_ports(plan: NetworkPlan) -> list[Interface]:
    return [i for s in plan.experiment.switch_names for i in plan.interfaces.get(s, [])]


def monitored_interfaces(plan: NetworkPlan) -> list[Interface]:
    """The egress interfaces whose queues are sampled into queue.csv, switches first."""
    wanted = queue_telemetry_directions(plan.experiment)
    if wanted is None:
        return switch_ports(plan)
    hosts = [i for h in plan.experiment.hosts for i in plan.interfaces.get(h, [])]
    return [i for i in switch_ports(plan) + hosts if (i.node, i.peer_node) in wanted]


def host_job_ids(plan: NetworkPlan) -> dict[str, int]:
    """Host IPv4 address -> job id of the job it runs (hosts without a job are left out)."""
    ids = plan.experiment.job_ids()
    return {plan.host_ip[w]: ids[job.name] for job in plan.experiment.jobs for w in job.workers}


def ecn_summary(plan: NetworkPlan, method: str) -> dict:
    """summary.json's `ecn`: how marking was done and every switch egress port's threshold."""
    return {"method": method,
            "thresholds": {f"{i.node}:{i.port}": port_threshold(plan, i).describe()
                           for i in switch_ports(plan)}}
