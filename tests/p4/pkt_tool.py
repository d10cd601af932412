"""Send or capture test packets with scapy inside a namespace (run through `ip netns exec`).

    python pkt_tool.py sniff IFACE UDP_PORT TIMEOUT EXPECTED   -> prints "ready", then one JSON
                                                                  line per captured packet
    python pkt_tool.py send IFACE SPEC_JSON                    -> sends the frames of the spec

SPEC_JSON: {"src_mac", "dst_mac", "src_ip", "dst_ip", "dport", "packets": [{"ttl", "tos",
"seq", "size"}, ...]}; all frames are built first and sent in one burst.
"""

import json
import sys

from scapy.all import IP, UDP, AsyncSniffer, Ether, Raw, conf, sendp  # noqa: E402

conf.verb = 0


def sniff(iface: str, port: int, timeout: float, expected: int) -> None:
    seen = []

    def keep(pkt):
        return pkt.haslayer(UDP) and pkt[UDP].dport == port

    sniffer = AsyncSniffer(iface=iface, lfilter=keep, store=True, count=expected,
                           started_callback=lambda: print("ready", flush=True))
    sniffer.start()
    sniffer.join(timeout=timeout)
    if sniffer.running:
        sniffer.stop()
    for pkt in sniffer.results or []:
        ip = pkt[IP]
        raw = bytes(ip)[: ip.ihl * 4]
        # verify the IPv4 header checksum as received
        total = sum((raw[i] << 8) + raw[i + 1] for i in range(0, len(raw), 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        payload = bytes(pkt[UDP].payload)
        seen.append({"src_mac": pkt[Ether].src, "dst_mac": pkt[Ether].dst, "ttl": ip.ttl,
                     "tos": ip.tos, "ecn": ip.tos & 3, "dscp": ip.tos >> 2,
                     "csum_ok": total == 0xFFFF,
                     "seq": int(payload[:8].decode()) if payload[:8].isdigit() else -1})
    for item in seen:
        print(json.dumps(item), flush=True)


def send(iface: str, spec_text: str) -> None:
    spec = json.loads(spec_text)
    frames = []
    for p in spec["packets"]:
        payload = f"{p['seq']:08d}".encode().ljust(p.get("size", 100), b"x")
        frames.append(Ether(src=spec["src_mac"], dst=spec["dst_mac"])
                      / IP(src=spec["src_ip"], dst=spec["dst_ip"], ttl=p.get("ttl", 64),
                           tos=p.get("tos", 0))
                      / UDP(sport=p.get("sport", 40000), dport=spec["dport"]) / Raw(payload))
    sendp(frames, iface=iface, verbose=False)


if __name__ == "__main__":
    if sys.argv[1] == "sniff":
        sniff(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
