"""Tunnel arithmetic and commands, without a kernel: the MTU each kind needs to carry
a link's frames, names that fit IFNAMSIZ, VNIs drawn per run and link."""

from __future__ import annotations

from mn_harness.cluster.tunnel import create_argv, device_name, draw, needed_mtu, rename_argv, taken


def test_the_underlay_must_take_the_links_frames_with_their_headers():
    assert needed_mtu("vxlan", "10.0.0.1") == 1550 and needed_mtu("vxlan", "fd00::1") == 1570
    assert needed_mtu("gretap", "10.0.0.1") == 1542
    assert needed_mtu("vxlan", "10.0.0.1", 9000) == 9050  # a link with `mtu: 9000`


def test_the_tunnel_end_gets_its_links_mtu():
    rename = rename_argv("vxlan", 5, "s1-eth3", "02:00:00:01:00:01", 9000)
    assert rename[-1][rename[-1].index("mtu") + 1] == "9000"


def test_names_fit_and_say_whose_they_are():
    assert len(device_name("vxlan", 2**24 - 1)) <= 15 and len(device_name("gretap", 2**32 - 1)) <= 15
    assert create_argv("vxlan", 7, "10.0.0.1", "10.0.0.2")[:8] == [
        "ip", "link", "add", "mnhv000007", "type", "vxlan", "id", "7"]
    assert "key" in create_argv("gretap", 7, "10.0.0.1", "10.0.0.2")


def test_two_runs_draw_different_vnis_and_a_redraw_differs():
    a = {draw("run-a", link, 0, "vxlan") for link in range(50)}
    b = {draw("run-b", link, 0, "vxlan") for link in range(50)}
    assert len(a) == 50 and not a & b
    assert draw("run-a", 0, 0, "vxlan") != draw("run-a", 0, 1, "vxlan")
    assert all(1 <= v < 2**24 for v in a)


def test_the_kernels_refusal_of_a_vni_in_use_is_recognised():
    assert taken("Error: A VXLAN device with the specified VNI already exists.")
    assert not taken("Error: Unknown device type.")
