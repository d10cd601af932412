"""Test support, not used by the harness itself: the P4 test bed (namespaces, veths and BMv2
switches brought up like the data plane's, without Mininet) and a multi-switch P4Runtime
controller. Imported by tests/ and bench/ only."""

from __future__ import annotations

from .controller import P4RuntimeController
from .p4testbed import ECN_TELEMETRY_P4, LinkQueue, P4Testbed, TestbedError, make_plan

__all__ = ["ECN_TELEMETRY_P4", "LinkQueue", "P4RuntimeController", "P4Testbed", "TestbedError",
           "make_plan"]
