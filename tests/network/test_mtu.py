"""A link's MTU (`mtu`, per link or in link_defaults): validated once, and every queue figure in
frames, the hosts' routes and the payload ceiling follow it (no namespace needed)."""

import pytest
import yaml

from mn_harness.config import Experiment
from mn_harness.config.dump import experiment_to_raw
from mn_harness.config.ecn import EcnThreshold
from mn_harness.config.emulation import Emulation
from mn_harness.errors import ConfigError
from mn_harness.frames import DEFAULT_MTU, MAX_MTU, MIN_MTU, frame_bytes, payload_ceiling, tcp_payload_bytes
from mn_harness.network.plan import NetworkPlan
from mn_harness.network.shaping import egress_commands, egress_shape, fifo_limit_bytes
from mn_harness.p4.limits import FRAME_BYTES
from tests.helpers import TOPOLOGIES


def demo(**link_defaults) -> dict:
    raw = yaml.safe_load((TOPOLOGIES / "dumbbell-2jobs.yaml").read_text())
    raw["link_defaults"].update(link_defaults)
    raw["run"]["dataplane"] = "linux"
    return raw


def test_frames_of_the_default_mtu_are_the_p4_sides_frame():
    assert frame_bytes(DEFAULT_MTU) == FRAME_BYTES
    assert tcp_payload_bytes(1500) == 1448  # Linux's MSS with timestamps on a 1500-byte path
    assert payload_ceiling(9000) == pytest.approx((9000 - 52) / 9014)
    assert payload_ceiling(1500) < payload_ceiling(9000) < 1


def test_link_defaults_mtu_reaches_every_link_and_a_link_may_set_its_own():
    raw = demo(mtu=9000)
    raw["links"][0]["mtu"] = 1500
    exp = Experiment.from_dict(raw, "demo")
    assert [link.mtu for link in exp.links] == [1500, 9000, 9000, 9000, 9000]
    assert exp.links[2].frame_bytes == 9014
    assert [link.mtu for link in Experiment.from_dict(demo(), "demo").links] == [DEFAULT_MTU] * 5


def test_config_yaml_keeps_the_mtu():
    exp = Experiment.from_dict(demo(mtu=9000), "demo")
    assert Experiment.from_dict(experiment_to_raw(exp), "again").links == exp.links
    assert "mtu" not in experiment_to_raw(Experiment.from_dict(demo(), "demo"))["links"][0]


@pytest.mark.parametrize(("value", "path"), [
    (MIN_MTU - 1, "links[0].mtu"), (MAX_MTU + 1, "links[0].mtu"), ("9000", "links[0].mtu"),
    (9000.0, "links[0].mtu"), (True, "links[0].mtu"),
])
def test_a_bad_mtu_is_one_line_naming_its_path(value, path):
    with pytest.raises(ConfigError) as err:
        Experiment.from_dict(demo(mtu=value), "demo")
    assert str(err.value).startswith(path) and "\n" not in str(err.value)


def test_the_queue_bound_is_in_frames_of_the_links_mtu():
    fits = (2**32 - 1) // 9014
    Experiment.from_dict(demo(mtu=9000, queue=fits), "demo")
    with pytest.raises(ConfigError, match=rf"links\[0\]\.queue.*at most {fits} packets"):
        Experiment.from_dict(demo(mtu=9000, queue=fits + 1), "demo")
    Experiment.from_dict(demo(queue=fits + 1), "demo")  # 1514-byte frames: fits


def test_bmv2_and_bridges_refuse_what_they_cannot_carry():
    raw = demo(mtu=9000)
    raw["run"]["dataplane"] = "bmv2"
    with pytest.raises(ConfigError, match=r"links\[0\]\.mtu.*only 1500 on the bmv2"):
        Experiment.from_dict(raw, "demo").check_dataplane_limits("bmv2")
    raw = demo()
    raw["links"][3]["mtu"] = 9000
    raw["run"]["emulation"] = {"switches": "bridge"}
    with pytest.raises(ConfigError, match=r"links\[3\]\.mtu.*one MTU"):
        Experiment.from_dict(raw, "demo")
    raw["links"] = [{**link, "mtu": 9000} for link in raw["links"]]
    Experiment.from_dict(raw, "demo")  # one MTU everywhere: fine


def test_the_fifo_burst_and_red_count_the_links_frames():
    link = Experiment.from_dict(demo(mtu=9000, bw="10Mbit"), "demo").links[0]  # h1-s1: the default's rate
    shape = egress_shape(link, Emulation(), access=True)
    assert shape is not None and shape.frame_bytes == 9014
    assert shape.limit == fifo_limit_bytes(100, 9014) == 100 * 9014
    cls = egress_commands("s1-eth3", shape)[1]
    assert cls[cls.index("burst") + 1] == str(4 * 9014)  # at least 4 frames, not 4 x 1514
    red = egress_commands("s1-eth3", shape, red_mark_bytes=20 * 9014)[-1]
    assert red[red.index("avpkt") + 1] == "9014" and red[red.index("max") + 1] == str(21 * 9014)


def test_packet_thresholds_and_the_port_programs_count_the_links_frames():
    from mn_harness.dataplane.linux import egress_config

    assert EcnThreshold(packets=20).threshold_bytes(9014) == 20 * 9014
    assert EcnThreshold(bytes=90140).threshold_packets(9014) == 10
    plan = NetworkPlan(Experiment.from_dict(demo(mtu=9000), "demo"))
    port = plan.interface_towards("s1", "s2")
    config = egress_config(plan, port, "backlog")
    assert config.mark_bytes == 20 * 9014 and config.limit_bytes == 100 * 9014


def test_hosts_route_to_a_path_through_a_smaller_mtu_with_that_mtu():
    raw = demo(mtu=9000)
    raw["links"][2]["mtu"] = 1500  # the bottleneck s1-s2 stays at 1500
    raw["links"][4]["mtu"] = 4000  # s2-h4
    plan = NetworkPlan(Experiment.from_dict(raw, "demo"))
    assert plan.path_mtu("h1", "h3") == 1500 and plan.path_mtu("h1", "h2") == 9000
    assert plan.path_mtu("h1", "h4") == 1500 and plan.path_mtu("h3", "h4") == 4000
    h1 = plan.route_mtus("h1")
    assert h1 == {plan.host_ip["h3"]: 1500, plan.host_ip["h4"]: 1500}  # not h2: same MTU as its own link
    assert plan.route_mtus("h4") == {plan.host_ip["h1"]: 1500, plan.host_ip["h2"]: 1500}
    assert NetworkPlan(Experiment.from_dict(demo(mtu=9000), "demo")).route_mtus("h1") == {}


def test_one_servers_part_of_the_plan_finds_the_path_mtu_through_the_others_nodes():
    """On a server of a run spread over several the plan holds only its own nodes' interfaces
    (cluster.part.local_view); the path still crosses the others' links."""
    from mn_harness.cluster.part import local_view

    raw = demo(mtu=9000)
    raw["links"][2]["mtu"] = 1500
    whole = NetworkPlan(Experiment.from_dict(raw, "demo"))
    part = local_view(whole, {"h1", "h2", "s1"})
    assert part.route_mtus("h1") == whole.route_mtus("h1") != {}
    same = local_view(NetworkPlan(Experiment.from_dict(demo(), "demo")), {"h1", "s1"})
    assert same.route_mtus("h1") == {}


def test_every_equal_cost_path_counts_for_the_path_mtu():
    raw = yaml.safe_load((TOPOLOGIES / "leaf-spine.yaml").read_text())
    raw["routing"] = "ecmp"
    raw["link_defaults"]["mtu"] = 9000
    exp = Experiment.from_dict(raw, "ls")
    spine_link = next(i for i, link in enumerate(exp.links) if "spine" in link.a + link.b)
    raw["links"][spine_link]["mtu"] = 1500
    plan = NetworkPlan(Experiment.from_dict(raw, "ls"))
    link = plan.experiment.links[spine_link]
    leaf = link.a if link.a.startswith("leaf") else link.b
    far = [h for h in plan.experiment.hosts if plan.gateway(h).peer_node != leaf]
    near = [h for h in plan.experiment.hosts if plan.gateway(h).peer_node == leaf]
    assert plan.path_mtu(near[0], far[0]) == 1500  # one of its equal-cost paths crosses the 1500 link
