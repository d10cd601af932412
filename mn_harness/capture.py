"""`--pcap LINK[,LINK]`: packet headers of chosen links, into the results folder's pcap/.

One tcpdump per link, inside the namespace of the link's first endpoint, on that endpoint's
interface: a veth end sees both directions of its link, so one capture holds both. Only headers
are kept (snap length SNAPLEN: Ethernet + IPv4 + TCP with options, and the first bytes of
payload), which is what congestion-control questions need and keeps files small. The files are
standard pcap (tcpdump, Wireshark, scapy read them). Capturing costs CPU: at 1 Gbit/s on a
2-core machine it can slow the run it observes, so capture only the links you look at.

Frames are captured as the kernel hands them over: on the Linux data plane a frame can be a GSO
super-packet of up to `run.gso_max_segs` MTUs (its IP length says so), on BMv2 every frame is
one MTU."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mn_harness.config import Experiment, LinkConfig
from mn_harness.errors import ConfigError, RunError

PCAP_DIR = "pcap"
SNAPLEN = 128
CAPTURE_MARKER = "tcpdump"  # what `mn-harness clean` matches in a capture's command line


class CaptureError(RunError):
    """tcpdump is missing or did not start."""


def parse_links(text: str | Sequence[str], experiment: Experiment,
                where: str = "--pcap") -> list[LinkConfig]:
    """`s1-s2,h1-s1` (either order of the endpoints; `s1->s2` also accepted) -> the links;
    ConfigError naming `where` for a link the experiment does not have."""
    names = text.split(",") if isinstance(text, str) else list(text)
    links: list[LinkConfig] = []
    by_ends = {frozenset((link.a, link.b)): link for link in experiment.links}
    for name in (n.strip() for n in names):
        ends = name.replace("->", "-").split("-")
        link = by_ends.get(frozenset(ends)) if len(ends) == 2 else None
        if link is None:
            known = ", ".join(link.name for link in experiment.links)
            raise ConfigError(where, f"no link {name!r} in the experiment (links: {known})")
        if link not in links:
            links.append(link)
    if not links:
        raise ConfigError(where, "expected LINK[,LINK...], e.g. s1-s2")
    return links


def tcpdump_argv(interface: str, out: Path, snaplen: int = SNAPLEN) -> list[str]:
    """-Z root: Debian's tcpdump would drop to user tcpdump, who may not write the results
    folder; -U: each packet is written at once, so an interrupted run keeps its capture."""
    return ["tcpdump", "-i", interface, "-n", "-s", str(snaplen), "-B", "8192", "-U", "-Z", "root",
            "-w", str(out)]


def check_tcpdump() -> str:
    path = shutil.which("tcpdump")
    if path is None:
        raise CaptureError("--pcap needs tcpdump: apt-get install tcpdump (scripts/setup.sh installs it)")
    return path


@dataclass
class Capture:
    link: LinkConfig
    interface: str
    path: Path
    stderr_path: Path
    proc: subprocess.Popen


class PacketCapture:
    """tcpdump on each chosen link while the network is up; start() waits until every capture
    is listening, stop() lets each flush its file."""

    def __init__(self, links: list[LinkConfig]):
        self.links = links
        self.captures: list[Capture] = []

    def start(self, nodes: dict, plan, results_dir: Path, timeout_s: float = 10.0) -> None:
        """Into results_dir/pcap/."""
        check_tcpdump()
        out = Path(results_dir) / PCAP_DIR
        out.mkdir(exist_ok=True)
        for link in self.links:
            intf = next(i for i in plan.interfaces[link.a] if i.link is link)
            path = out / f"{link.name}.pcap"
            stderr_path = out / f"{link.name}.tcpdump.log"
            with open(stderr_path, "w") as err:
                proc = nodes[link.a].popen(tcpdump_argv(intf.name, path), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=err)
            self.captures.append(Capture(link, intf.name, path, stderr_path, proc))
        deadline = time.monotonic() + timeout_s
        for cap in self.captures:
            while "listening on" not in _read(cap.stderr_path):
                if cap.proc.poll() is not None or time.monotonic() > deadline:
                    text = " ".join(_read(cap.stderr_path).split())
                    raise CaptureError(f"--pcap {cap.link.name}: tcpdump on {cap.interface} did not "
                                       f"start: {text or 'no output'}")
                time.sleep(0.05)

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.captures if c.proc.poll() is None]

    def stop(self) -> dict[str, dict]:
        """Stop every capture (SIGINT: tcpdump writes its last packets and its counts);
        returns {link: {file, interface, tcpdump}} for summary.json."""
        for cap in self.captures:
            if cap.proc.poll() is None:
                cap.proc.send_signal(signal.SIGINT)
        out = {}
        for cap in self.captures:
            try:
                cap.proc.wait(5)
            except subprocess.TimeoutExpired:
                cap.proc.kill()
                cap.proc.wait(5)
            counts = [ln for ln in _read(cap.stderr_path).splitlines() if "packets" in ln]
            out[cap.link.name] = {"file": f"{PCAP_DIR}/{cap.path.name}", "interface": cap.interface,
                                  "tcpdump": "; ".join(counts)}
        self.captures = []
        return out


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
