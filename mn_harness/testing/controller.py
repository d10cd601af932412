"""Connections to several switches from one process, keyed by switch name.

A convenience for tests and interactive use; the harness keeps its SwitchConnections in the data
plane (mn_harness.dataplane.bmv2) and does not need this."""

from __future__ import annotations

from mn_harness.p4.errors import P4RuntimeError
from mn_harness.p4.runtime import SwitchConnection


class P4RuntimeController:
    def __init__(self):
        self.switches: dict[str, SwitchConnection] = {}

    def connect(self, name: str, address: str, device_id: int, *, timeout: float = 10.0,
                election_id: int = 1) -> SwitchConnection:
        if name in self.switches:
            raise P4RuntimeError(f"P4Runtime: already connected to {name}")
        conn = SwitchConnection(address, device_id, name=name, election_id=election_id,
                                timeout=timeout).connect()
        self.switches[name] = conn
        return conn

    def __getitem__(self, name: str) -> SwitchConnection:
        return self.switches[name]

    def close(self) -> None:
        for conn in self.switches.values():
            conn.close()
        self.switches.clear()

    def __enter__(self) -> P4RuntimeController:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
