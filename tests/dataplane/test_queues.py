"""Which ports mark at which threshold and which are sampled, from the config and the plan (the
same answers for both data planes)."""

from mn_harness.config import load_experiment_dict
from mn_harness.config.ecn import EcnThreshold
from mn_harness.dataplane.queues import (
    ecn_summary,
    host_job_ids,
    link_label,
    monitored_interfaces,
    port_threshold,
    switch_ports,
)
from mn_harness.network.plan import NetworkPlan
from tests.helpers import two_switch_line as dumbbell


def plan_of(raw) -> NetworkPlan:
    return NetworkPlan(load_experiment_dict(raw))


def thresholds(plan: NetworkPlan) -> dict[str, str]:
    return {link_label(i): port_threshold(plan, i).describe() for i in plan.interfaces["s1"]
            + plan.interfaces["s2"] + plan.interfaces["h1"]}


def test_link_beats_switch_beats_the_default_and_hosts_never_mark():
    raw = dumbbell()
    raw["switches"] = [{"name": "s1", "ecn_threshold": "30KB"}, "s2"]
    raw["links"][1]["ecn_threshold"] = 7  # s1-s2: both switch ends
    plan = plan_of(raw)
    assert thresholds(plan) == {"s1->h1": "30000 bytes", "s1->s2": "7 packets", "s2->s1": "7 packets",
                                "s2->h2": "20 packets", "h1->s1": "off"}
    raw["links"][1]["ecn_threshold"] = "off"
    assert port_threshold(plan_of(raw), plan_of(raw).interfaces["s1"][1]) == EcnThreshold()
    summary = ecn_summary(plan, "bpf-backlog")
    assert summary["method"] == "bpf-backlog"
    assert summary["thresholds"] == {"s1:1": "30000 bytes", "s1:2": "7 packets", "s2:1": "7 packets",
                                     "s2:2": "20 packets"}


def test_sampled_ports_default_to_every_switch_port_or_follow_the_file():
    plan = plan_of(dumbbell())
    assert [link_label(i) for i in monitored_interfaces(plan)] == ["s1->h1", "s1->s2", "s2->s1", "s2->h2"]
    assert monitored_interfaces(plan) == switch_ports(plan)
    assert monitored_interfaces(plan_of(dumbbell(queue_telemetry=False))) == []
    named = plan_of(dumbbell(queue_telemetry=["s1->s2", "h1-s1"]))
    assert [link_label(i) for i in monitored_interfaces(named)] == ["s1->h1", "s1->s2", "h1->s1"]


def test_job_ids_by_host_address():
    plan = plan_of(dumbbell())
    assert host_job_ids(plan) == {plan.host_ip["h1"]: 1, plan.host_ip["h2"]: 1}
