"""`servers:`: the machines one experiment is spread over, and which node runs where.

    servers:
      - {name: a, address: 192.0.2.10}                   # ssh as root, port 22
      - {name: b, address: 192.0.2.11, user: lab, port: 2222, nodes: [s2, h3, h4],
         python: /opt/mn-harness/.venv/bin/python}

Every host and switch runs on exactly one server. `nodes` places them explicitly; whatever no
server names is placed automatically: a switch with the hosts hanging off it is one unit (a
leaf and its hosts stay on one server, so only links between switches cross), and units go, the
largest first, to the server with the fewest nodes so far (ties: list order). This is the idea
of Mininet's cluster edition's SwitchBinPlacer (switches in even bins, hosts with their switch),
weighted by the hosts a switch carries and around what `nodes` fixed. The result is written
back into each server's `nodes`, so config.yaml records the placement the run used.

A link whose ends are on two servers crosses between them (a kernel tunnel: mn_harness.cluster).
Without `servers:` nothing of this applies and the experiment runs on this machine."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mn_harness import collectives
from mn_harness.errors import ConfigError, shown

MAX_SERVERS = 64
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                          r"[A-Za-z0-9])?)*")
_USER_RE = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_PATH_RE = re.compile(r"/[A-Za-z0-9_./+-]{0,1023}")
KEYS = {"name", "address", "user", "port", "python", "nodes"}


@dataclass(frozen=True)
class ServerConfig:
    name: str
    address: str  # what ssh connects to; its IP carries the tunnels
    user: str = "root"  # not root: the project runs there with `sudo -n` (passwordless sudo)
    port: int = 22
    python: str | None = None  # the project's interpreter there; None: the same path as here
    nodes: tuple[str, ...] = ()  # after loading: every node this server runs (the placement)

    @property
    def where(self) -> str:
        return f"server {self.name} ({self.address})"


def _check_address(value: Any, path: str) -> str:
    """An IP address or a host name: never anything ssh could read as an option."""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            if len(value) <= 253 and _HOSTNAME_RE.fullmatch(value):
                return value
    raise ConfigError(path, f"expected an IP address or a host name, got {value!r}")


def parse_server(raw: Any, path: str, check_name) -> ServerConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"expected a mapping with name and address, got {type(raw).__name__}")
    for key in raw:
        if key not in KEYS:
            raise ConfigError(f"{path}.{shown(key)}", f"unknown key (allowed: {', '.join(sorted(KEYS))})")
    for key in ("name", "address"):
        if key not in raw:
            raise ConfigError(f"{path}.{key}", "required key is missing")
    name = check_name(raw["name"], f"{path}.name")
    user = raw.get("user", "root")
    if not isinstance(user, str) or not _USER_RE.fullmatch(user):
        raise ConfigError(f"{path}.user", f"expected a user name (lower-case letters, digits, _ . -), got {user!r}")
    port = raw.get("port", 22)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{path}.port", f"expected a TCP port 1..65535, got {port!r}")
    python = raw.get("python")
    if python is not None and (not isinstance(python, str) or not _PATH_RE.fullmatch(python)
                               or "/../" in python + "/"):
        raise ConfigError(f"{path}.python", f"expected an absolute path of a Python interpreter, got {python!r}")
    nodes = raw.get("nodes", [])
    if not isinstance(nodes, list):
        raise ConfigError(f"{path}.nodes", f"expected a list of node names, got {type(nodes).__name__}")
    return ServerConfig(name, _check_address(raw["address"], f"{path}.address"), user, port, python,
                        tuple(check_name(n, f"{path}.nodes[{i}]") for i, n in enumerate(nodes)))


def parse_servers(raw: Any, hosts: Sequence[str], switches: Sequence[str],
                  links: Sequence[tuple[str, str]], check_name) -> tuple[ServerConfig, ...]:
    """`servers:` validated and every node placed (the module docstring); () without it."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("servers", f"expected a list of servers, got {type(raw).__name__}")
    if not raw:
        raise ConfigError("servers", "an empty list: leave `servers` out to run on this machine")
    if len(raw) > MAX_SERVERS:
        raise ConfigError("servers", f"{len(raw)} servers; at most {MAX_SERVERS}")
    servers = [parse_server(s, f"servers[{i}]", check_name) for i, s in enumerate(raw)]
    known = set(hosts) | set(switches)
    placed: dict[str, str] = {}
    seen_names: dict[str, int] = {}
    seen_addresses: dict[tuple[str, int], int] = {}
    for i, server in enumerate(servers):
        if server.name in seen_names:
            raise ConfigError(f"servers[{i}].name",
                              f"duplicate server {server.name!r} (also servers[{seen_names[server.name]}])")
        seen_names[server.name] = i
        if (server.address, server.port) in seen_addresses:
            raise ConfigError(f"servers[{i}].address", f"{server.address} port {server.port} is also "
                              f"servers[{seen_addresses[server.address, server.port]}]")
        seen_addresses[server.address, server.port] = i
        for k, node in enumerate(server.nodes):
            where = f"servers[{i}].nodes[{k}]"
            if node not in known:
                raise ConfigError(where, f"unknown node {node!r}")
            if node in placed:
                raise ConfigError(where, f"node {node!r} is already placed on server {placed[node]!r}")
            placed[node] = server.name
    placement = place(hosts, switches, links, [s.name for s in servers], placed)
    out = []
    for i, server in enumerate(servers):
        nodes = tuple(n for n in (*hosts, *switches) if placement[n] == server.name)
        if not nodes:
            raise ConfigError(f"servers[{i}]", f"no node is placed on server {server.name!r} (name some in "
                              "its `nodes`, or leave the server out)")
        out.append(ServerConfig(server.name, server.address, server.user, server.port, server.python, nodes))
    return tuple(out)


def place(hosts: Sequence[str], switches: Sequence[str], links: Sequence[tuple[str, str]],
          servers: Sequence[str], fixed: Mapping[str, str]) -> dict[str, str]:
    """Node -> server: `fixed` as given, the rest automatically (the module docstring)."""
    host_set = set(hosts)
    switch_of = {}
    for a, b in links:
        if a in host_set:
            switch_of[a] = b
        elif b in host_set:
            switch_of[b] = a
    placement = dict(fixed)
    for host in hosts:  # a host follows its switch where the switch was placed by hand
        if host not in placement and switch_of.get(host) in fixed:
            placement[host] = fixed[switch_of[host]]
    units = [[s, *(h for h in hosts if switch_of.get(h) == s and h not in placement)]
             for s in switches if s not in placement]
    load = {s: 0 for s in servers}
    for server in placement.values():
        load[server] += 1
    for unit in sorted(units, key=lambda u: (-len(u), u[0])):
        target = min(servers, key=lambda s: (load[s], servers.index(s)))
        for node in unit:
            placement[node] = target
        load[target] += len(unit)
    return placement


def crossing_links(servers: Sequence[ServerConfig], links: Sequence[Any]) -> list[tuple[Any, str, str]]:
    """(link, server of end a, server of end b) for every link whose ends are on two servers."""
    where = {node: s.name for s in servers for node in s.nodes}
    return [(link, where[link.a], where[link.b]) for link in links if where[link.a] != where[link.b]]


def describe_placement(servers: Sequence[ServerConfig], links: Sequence[Any]) -> list[str]:
    """`validate`'s lines: each server's nodes, then the links that cross between servers."""
    out = [f"server {s.name} ({s.user}@{s.address}, port {s.port}): {', '.join(s.nodes)}" for s in servers]
    crossing = crossing_links(servers, links)
    out += [f"crossing link {link.name}: server {a} - server {b} (a tunnel)" for link, a, b in crossing]
    if not crossing:
        out.append("crossing links: none (each server runs a network of its own)")
    return out


def check_cluster(experiment: Any) -> None:
    """What a run spread over servers cannot do (yet), refused before anything is built."""
    if not experiment.servers:
        return
    if experiment.run.dataplane == "bmv2":
        raise ConfigError("run.dataplane", "bmv2 does not run across servers: use linux (or auto) with `servers`")
    if experiment.routing == "ecmp":
        raise ConfigError("routing", "ecmp does not run across servers (the routers' choices are read on one "
                          "machine): use shortest with `servers`")
    if experiment.run.isolated:
        raise ConfigError("run.isolated", "not with `servers` (run each job alone as its own experiment)")
    if experiment.run.shifts.enabled:
        raise ConfigError("run.shifts", "not with `servers` (its scheduler follows every job's workers from one "
                          "machine)")
    for i, job in enumerate(experiment.jobs):
        for phase in job.comm_phases:
            if collectives.get(phase.collective).engine != collectives.SYNTHETIC:
                raise ConfigError(f"jobs[{i}].collective", f"{phase.collective} does not run across servers: "
                                  "synthetic collectives only with `servers`")
    for i, switch in enumerate(experiment.switches):
        if switch.program is not None:
            raise ConfigError(f"switches[{i}].program", "P4 programs need the bmv2 data plane, which does not "
                              "run across servers")


def servers_to_raw(servers: Sequence[ServerConfig]) -> list[dict]:
    """config.yaml's `servers`: every node's server written out."""
    out = []
    for s in servers:
        raw: dict[str, Any] = {"name": s.name, "address": s.address}
        if s.user != "root":
            raw["user"] = s.user
        if s.port != 22:
            raw["port"] = s.port
        if s.python is not None:
            raw["python"] = s.python
        raw["nodes"] = list(s.nodes)
        out.append(raw)
    return out
