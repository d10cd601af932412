"""Links between servers: a kernel tunnel whose two ends live in the two nodes' namespaces.

A link whose ends run on two servers becomes one tunnel device at each end, as in Mininet's
cluster edition (RemoteGRELink): created in the server's own namespace, where the underlay is,
then moved into the node's namespace and given the plan's name, MAC and address. From there on
it is a link end like any other: HTB at the link's rate, its queue, the egress program that
marks ECN and counts queue.csv, the link monitor. The encapsulating socket stays in the
server's namespace (the kernel keeps a tunnel's socket where the device was made), so the
packets cross the underlay between the servers' addresses and nowhere else.

Kinds, in order of preference: VXLAN (UDP port VXLAN_PORT, a 24-bit VNI) and gretap (a 32-bit
GRE key). The kernel of each server is probed (a throwaway device in a throwaway namespace);
a link takes the first kind both its servers have.

What the cluster edition gets wrong, and what is done instead:
- Keys: it counts GRE keys from 1 in every process, so two runs between the same servers
  collide. Here each link's VNI/key is drawn from the run's id, and the kernel, which refuses a
  second device with the same VNI (same key between the same addresses) in one namespace, is the
  judge: a taken one is dropped at both ends and another drawn (TunnelPlan.redraw).
- MTU: it forces every link to 1450, so hosts send smaller frames than a real 1500-byte
  Ethernet. Here the tunnel carries frames of the link's MTU (its `mtu`, 1500 unless set, as on
  a link inside one server): the underlay must take them with their headers (OVERHEAD), and a
  server whose underlay cannot is refused in one line.
- Clean-up: it runs `mn -c` everywhere, ending other users' networks. Here a tunnel waits in
  the server's namespace only between its creation and its move (under a name of this run,
  recorded in the server's state file: mn_harness.state.RemoveTunnel) and then goes with its
  node's namespace."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import subprocess
from dataclasses import dataclass

from mn_harness.errors import RunError
from mn_harness.frames import DEFAULT_MTU

KINDS = ("vxlan", "gretap")
VXLAN_PORT = 4789  # IANA's
# outer headers per frame: the inner Ethernet header (14), then UDP (8) + VXLAN (8), or GRE
# with a key (8), then the outer IP header (20, IPv6 40)
OVERHEAD = {("vxlan", 4): 14 + 16 + 20, ("vxlan", 6): 14 + 16 + 40,
            ("gretap", 4): 14 + 8 + 20, ("gretap", 6): 14 + 8 + 40}
MAX_ID = {"vxlan": 2**24 - 1, "gretap": 2**32 - 1}


class TunnelError(RunError):
    """A tunnel could not be made (no kind in common, an underlay too small, the kernel refused)."""


def needed_mtu(kind: str, address: str, link_mtu: int = DEFAULT_MTU) -> int:
    """The underlay MTU a tunnel of `kind` to `address` needs to carry a link's full frames."""
    return link_mtu + OVERHEAD[kind, ipaddress.ip_address(address).version]


def device_name(kind: str, ident: int) -> str:
    """The name a tunnel has in the server's namespace before its move (IFNAMSIZ - 1 = 15)."""
    return f"mnhv{ident:06x}" if kind == "vxlan" else f"mnhg{ident:08x}"


def create_argv(kind: str, ident: int, local: str, remote: str) -> list[str]:
    """The tunnel device, in the server's namespace (its underlay)."""
    name = device_name(kind, ident)
    if kind == "vxlan":
        return ["ip", "link", "add", name, "type", "vxlan", "id", str(ident), "local", local, "remote", remote,
                "dstport", str(VXLAN_PORT), "nolearning"]
    family = "ip6gretap" if ipaddress.ip_address(remote).version == 6 else "gretap"
    return ["ip", "link", "add", name, "type", family, "local", local, "remote", remote, "key", str(ident),
            "ttl", "64"]


def move_argv(kind: str, ident: int, pid: int) -> list[str]:
    return ["ip", "link", "set", device_name(kind, ident), "netns", str(pid)]


def rename_argv(kind: str, ident: int, name: str, mac: str, mtu: int = DEFAULT_MTU) -> list[list[str]]:
    """In the node's namespace: the plan's name and MAC, the link's MTU, up."""
    return [["ip", "link", "set", "dev", device_name(kind, ident), "name", name],
            ["ip", "link", "set", "dev", name, "address", mac, "mtu", str(mtu), "up"]]


def taken(stderr: str) -> bool:
    """The kernel's answer when the VNI (key) or the name is in use in that namespace."""
    text = stderr.lower()
    return "exists" in text or "in use" in text


def draw(seed: str, link: int, attempt: int, kind: str) -> int:
    """A VNI / GRE key for `link` of the run `seed`, the attempt-th draw (never 0)."""
    digest = hashlib.sha256(f"{seed}|{link}|{attempt}".encode()).digest()
    return 1 + int.from_bytes(digest[:8], "big") % MAX_ID[kind]


@dataclass(frozen=True)
class TunnelEnd:
    """One server's end of one crossing link."""

    link: int  # index in experiment.links
    kind: str
    ident: int  # VNI / key
    local: str  # this server's underlay address
    remote: str  # the other server's

    def as_dict(self) -> dict:
        return {"link": self.link, "kind": self.kind, "ident": self.ident, "local": self.local, "remote": self.remote}

    @classmethod
    def from_dict(cls, raw: dict) -> TunnelEnd:
        return cls(int(raw["link"]), str(raw["kind"]), int(raw["ident"]), str(raw["local"]), str(raw["remote"]))


# -- on the server ---------------------------------------------------------------------------

def probe_kinds() -> list[str]:
    """The tunnel kinds this kernel makes, each tried in a namespace of its own that ends at once."""
    tries = {"vxlan": "ip link add mnhprobe type vxlan id 1 dstport 4789 local 127.0.0.1",
             "gretap": "ip link add mnhprobe type gretap local 127.0.0.1 remote 127.0.0.2 key 1"}
    out = []
    for kind in KINDS:
        proc = subprocess.run(["unshare", "--net", "sh", "-c", tries[kind]], capture_output=True, timeout=30)
        if proc.returncode == 0:
            out.append(kind)
    return out


def underlay(remote: str) -> dict:
    """How this server reaches `remote`: its source address, the device and the device's MTU."""
    def ip_json(*argv: str) -> list:
        proc = subprocess.run(["ip", "-j", *argv], capture_output=True, text=True, timeout=20)
        if proc.returncode != 0:
            raise TunnelError(f"cannot reach {remote}: {proc.stderr.strip() or 'no route'}")
        return json.loads(proc.stdout or "[]")

    route = ip_json("route", "get", remote)
    if not route or "dev" not in route[0]:
        raise TunnelError(f"no route to {remote}")
    dev = route[0]["dev"]
    src = route[0].get("prefsrc") or route[0].get("src")
    link = ip_json("link", "show", "dev", dev)
    return {"dev": dev, "src": src, "mtu": int(link[0].get("mtu", 0)) if link else 0}


def run_ip(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=20)


def create(end: TunnelEnd) -> str:
    """Make the device in this namespace: "ok", or "taken" when the VNI/key is in use."""
    proc = run_ip(create_argv(end.kind, end.ident, end.local, end.remote))
    if proc.returncode == 0:
        return "ok"
    if taken(proc.stderr):
        return "taken"
    argv = create_argv(end.kind, end.ident, end.local, end.remote)
    raise TunnelError(f"{end.kind} tunnel to {end.remote}: `{' '.join(argv)}` failed: {proc.stderr.strip()}")


def _ident(kind: str, data: dict) -> int | None:
    """The VNI (vxlan) or the input key (gretap: iproute2 prints it dotted, as 0.0.0.7)."""
    raw = data.get("id") if kind == "vxlan" else data.get("ikey")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(ipaddress.IPv4Address(raw)) if "." in raw else int(raw)
        except ValueError:
            return None
    return None


def delete(kind: str, ident: int) -> bool:
    """Remove the device of this run from this namespace if it is still here (identity: its name,
    its kind and its VNI/key). True when it is gone."""
    name = device_name(kind, ident)
    proc = subprocess.run(["ip", "-j", "-d", "link", "show", "dev", name], capture_output=True, text=True, timeout=20)
    if proc.returncode != 0:
        return True  # not here (moved into its node, or gone)
    try:
        info = json.loads(proc.stdout)[0].get("linkinfo", {})
    except (ValueError, IndexError, AttributeError):
        return False
    ours = info.get("info_kind") in (kind, "ip6gretap") and _ident(kind, info.get("info_data", {})) == ident
    if not ours:
        return True  # someone else's device under that name: never touched
    return run_ip(["ip", "link", "del", "dev", name]).returncode == 0
