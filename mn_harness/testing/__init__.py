"""Test support, not used by the harness itself: the P4 test bed (namespaces, veths and BMv2
switches brought up like the data plane's, without Mininet), a multi-switch P4Runtime
controller, and the public pytest plugin for P4 unit tests (pytest_p4: fixtures over
p4network.P4Network, packet sockets on the ports in ports.py, expectations in packets.py, the
YAML test form in p4cases.py; those need scapy and are imported on their own)."""

from __future__ import annotations

from .controller import P4RuntimeController
from .p4testbed import ECN_TELEMETRY_P4, LinkQueue, P4Testbed, TestbedError, make_plan

__all__ = ["ECN_TELEMETRY_P4", "LinkQueue", "P4RuntimeController", "P4Testbed", "TestbedError",
           "make_plan"]
