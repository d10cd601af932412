"""mn_harness/p4/programs/aggregation.p4 on BMv2: exact sums for 2, 3 and 4 workers, duplicates
not added twice, a lost result re-sent, two jobs at once, slot reuse and stale packets,
saturation reported, ordinary traffic still forwarded.

Each host runs a small agent (this file, `python test_aggregation_bmv2.py agent IP PORTS`) in its
namespace with real UDP sockets; the test drives the agents over stdin/stdout, one JSON line per
command, so the order in which contributions reach the switch is exact."""

from __future__ import annotations

import json
import random
import select
import socket
import subprocess
import sys
import time

from mn_harness.p4.limits import AGG_FLAG_RESULT, AGG_FLAG_SATURATED, AGG_PORT_BASE, AGG_VECLEN
from mn_harness.worker.inc import INT32_MAX, INT32_MIN, decode, encode


# -- the agent (runs inside a host namespace) ---------------------------------------------------
def agent(ip: str, ports: str) -> None:
    socks = {}
    for p in ports.split(","):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((ip, int(p)))
        socks[s] = int(p)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "send":
            by_port = {p: s for s, p in socks.items()}
            for pk in cmd["packets"]:
                data = encode(pk["job"], pk["slot"], pk["seq"], pk["worker"], pk["n"],
                              pk["values"], pk.get("flags", 0))
                by_port[pk["port"]].sendto(data, (pk["dst"], pk.get("dport", pk["port"])))
            print(json.dumps({"sent": len(cmd["packets"])}), flush=True)
        elif cmd["op"] == "recv":
            got = []
            deadline = time.monotonic() + cmd["timeout"]
            while len(got) < cmd["count"]:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ready, _, _ = select.select(list(socks), [], [], left)
                for s in ready:
                    data, (src, sport) = s.recvfrom(4096)
                    job, slot, seq, worker, n, flags, values = decode(data)
                    got.append({"port": socks[s], "src": src, "sport": sport, "job": job,
                                "slot": slot, "seq": seq, "worker": worker, "n": n,
                                "flags": flags, "values": list(values)})
            print(json.dumps({"packets": got}), flush=True)
        else:
            return


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "agent":
    agent(sys.argv[2], sys.argv[3])
    sys.exit(0)


# -- the tests ----------------------------------------------------------------------------------
import pytest  # noqa: E402

from mn_harness.p4.aggregation import (  # noqa: E402
    AGGREGATION_P4,
    AggJob,
    agg_udp_port,
    allocate_slots,
    plan_worker,
    read_stats,
)
from mn_harness.p4.runtime import P4Info  # noqa: E402
from mn_harness.testing import P4Testbed, make_plan  # noqa: E402

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

HOSTS = [f"h{i}" for i in range(1, 6)]
SLOTS = 4
# job id -> worker hosts (rank order)
JOBS = {2: ("h1", "h2"), 3: ("h1", "h2", "h3"), 4: ("h1", "h2", "h3", "h4"), 5: ("h3", "h4")}
ORDINARY_PORT = AGG_PORT_BASE + 60   # inside the aggregation port range, but no job 60


def topology():
    return make_plan(HOSTS, ["s1"], [(h, "s1") for h in HOSTS])


def agg_jobs(plan):
    return allocate_slots([AggJob(job_id, tuple(plan_worker(plan, h, r) for r, h in enumerate(hosts)),
                                  SLOTS) for job_id, hosts in JOBS.items()])


class Agent:
    def __init__(self, bed, host):
        ports = sorted({agg_udp_port(j) for j, hs in JOBS.items() if host in hs}
                       | {ORDINARY_PORT})
        self.proc = bed.host_popen(host, [sys.executable, __file__, "agent", bed.ip(host),
                                          ",".join(map(str, ports))],
                                   stdin=subprocess.PIPE)
        assert self._reply(10).get("ready"), self.proc.stderr.read()

    def _reply(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("agent did not answer")
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"agent died: {self.proc.stderr.read()}")
        return json.loads(line)

    def send(self, *packets):
        self.proc.stdin.write(json.dumps({"op": "send", "packets": list(packets)}) + "\n")
        self.proc.stdin.flush()
        return self._reply(10)

    def recv(self, count, timeout=3.0):
        self.proc.stdin.write(json.dumps({"op": "recv", "count": count,
                                          "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        return self._reply(timeout + 10)["packets"]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    plan = topology()
    tb = P4Testbed(plan, program=AGGREGATION_P4, agg_jobs={"s1": agg_jobs(plan)},
                   cache_dir=tmp_path_factory.mktemp("p4cache"))
    with tb:
        tb.agents = {h: Agent(tb, h) for h in HOSTS}
        yield tb


_seq = [1000]


def fresh_seq(step=1):
    _seq[0] += step
    return _seq[0]


def gateway(bed, host):
    """Workers send to their own gateway: the switch port's address."""
    return bed.plan.gateway(host).peer_ip


def contribution(bed, job_id, rank, seq, values, slot=0):
    return {"job": job_id, "slot": slot, "seq": seq, "worker": rank, "n": len(JOBS[job_id]),
            "values": values, "port": agg_udp_port(job_id),
            "dst": gateway(bed, JOBS[job_id][rank])}


def vector(rng, lo=-(1 << 24), hi=1 << 24):
    return [rng.randint(lo, hi) for _ in range(AGG_VECLEN)]


def test_p4info_names(bed):
    info = P4Info.from_file(bed.program.p4info_path)
    for table in ("arp_responder", "ipv4_lpm", "job_classify", "egress_port_cfg", "agg_job",
                  "agg_result_dst"):
        info.table(table)
    for counter in ("port_tx", "job_tx", "agg_stats"):
        info.counter(counter)


@pytest.mark.parametrize("job_id", [2, 3, 4])
def test_exact_sums(bed, job_id):
    rng = random.Random(job_id)
    hosts = JOBS[job_id]
    seq = fresh_seq()
    inputs = [vector(rng) for _ in hosts]
    inputs[0][0], inputs[-1][1] = -5, 7   # small and negative values survive
    for rank, host in enumerate(hosts):
        bed.agents[host].send(contribution(bed, job_id, rank, seq, inputs[rank], slot=1))
    expected = [sum(col) for col in zip(*inputs, strict=True)]
    for host in hosts:
        [res] = bed.agents[host].recv(1)
        assert res["values"] == expected
        assert res["flags"] == AGG_FLAG_RESULT
        assert (res["job"], res["seq"], res["slot"]) == (job_id, seq, 1)
        assert res["src"] == gateway(bed, host) and res["sport"] == agg_udp_port(job_id)
        assert bed.agents[host].recv(1, timeout=0.3) == []  # exactly one result each


def test_several_slots_in_flight(bed):
    """A window: all slots of job 4 busy at once, contributions interleaved."""
    rng = random.Random(7)
    hosts = JOBS[4]
    seqs = [fresh_seq() for _ in range(2 * SLOTS)]
    inputs = {s: [vector(rng) for _ in hosts] for s in seqs}
    for rank, host in enumerate(hosts):
        bed.agents[host].send(*[contribution(bed, 4, rank, s, inputs[s][rank], slot=k)
                                for k, s in enumerate(seqs)])
    for host in hosts:
        got = {r["seq"]: r for r in bed.agents[host].recv(len(seqs))}
        assert sorted(got) == seqs
        for k, s in enumerate(seqs):
            assert got[s]["slot"] == k
            assert got[s]["values"] == [sum(c) for c in zip(*inputs[s], strict=True)]


def test_duplicate_not_added_twice_and_lost_result_resent(bed):
    rng = random.Random(3)
    a1, a2, a3 = (bed.agents[h] for h in JOBS[3])
    before = read_stats(bed.conn("s1"), 3)
    seq = fresh_seq()
    v = [vector(rng) for _ in range(3)]
    a1.send(contribution(bed, 3, 0, seq, v[0]))
    a1.send(contribution(bed, 3, 0, seq, v[0]))           # retransmission before completion
    a2.send(contribution(bed, 3, 1, seq, v[1]))
    assert a1.recv(1, timeout=0.5) == []             # 2 of 3 distinct workers: no result
    a3.send(contribution(bed, 3, 2, seq, v[2]))
    expected = [sum(c) for c in zip(*v, strict=True)]
    for agent in (a1, a2, a3):
        [res] = agent.recv(1)
        assert res["values"] == expected
    # worker 2 "lost" the result and retransmits: only it gets the stored sum back
    a2.send(contribution(bed, 3, 1, seq, v[1]))
    [res] = a2.recv(1)
    assert res["values"] == expected and res["flags"] & AGG_FLAG_RESULT and res["seq"] == seq
    assert a1.recv(1, timeout=0.3) == [] and a3.recv(1, timeout=0.1) == []
    after = read_stats(bed.conn("s1"), 3)
    assert after["duplicate"] - before["duplicate"] == 1
    assert after["resent"] - before["resent"] == 1
    assert after["added"] - before["added"] == 3
    assert after["results"] - before["results"] == 1


def test_two_jobs_at_once_get_their_own_sums(bed):
    """Jobs 2 (h1, h2) and 5 (h3, h4): same slot index and sequence number, interleaved."""
    rng = random.Random(5)
    seq = fresh_seq()
    v2 = [vector(rng) for _ in range(2)]
    v5 = [vector(rng) for _ in range(2)]
    bed.agents["h1"].send(contribution(bed, 2, 0, seq, v2[0], slot=3))
    bed.agents["h3"].send(contribution(bed, 5, 0, seq, v5[0], slot=3))
    bed.agents["h4"].send(contribution(bed, 5, 1, seq, v5[1], slot=3))
    bed.agents["h2"].send(contribution(bed, 2, 1, seq, v2[1], slot=3))
    for host, v in (("h1", v2), ("h2", v2), ("h3", v5), ("h4", v5)):
        [res] = bed.agents[host].recv(1)
        assert res["values"] == [sum(c) for c in zip(*v, strict=True)], host
        assert res["job"] == (2 if v is v2 else 5)


def test_slot_out_of_the_jobs_range_is_rejected(bed):
    before = read_stats(bed.conn("s1"), 2)
    seq = fresh_seq()
    for rank, host in enumerate(JOBS[2]):
        bed.agents[host].send(contribution(bed, 2, rank, seq, [1] * AGG_VECLEN, slot=2 * SLOTS))
    assert bed.agents["h1"].recv(1, timeout=0.5) == []
    assert read_stats(bed.conn("s1"), 2)["bad"] - before["bad"] == 2


def test_slot_reused_after_completion_and_stale_dropped(bed):
    rng = random.Random(9)
    h1, h2 = bed.agents["h1"], bed.agents["h2"]
    old = fresh_seq()
    v_old = [vector(rng) for _ in range(2)]
    for rank, agent in enumerate((h1, h2)):
        agent.send(contribution(bed, 2, rank, old, v_old[rank], slot=2))
    for agent in (h1, h2):
        assert agent.recv(1)[0]["values"] == [a + b for a, b in zip(*v_old, strict=True)]
    new = fresh_seq(2 * SLOTS)
    v_new = [vector(rng) for _ in range(2)]
    for rank, agent in enumerate((h1, h2)):
        agent.send(contribution(bed, 2, rank, new, v_new[rank], slot=2))
    for agent in (h1, h2):
        [res] = agent.recv(1)
        assert res["seq"] == new
        assert res["values"] == [a + b for a, b in zip(*v_new, strict=True)]  # nothing old
    before = read_stats(bed.conn("s1"), 2)
    h1.send(contribution(bed, 2, 0, old, v_old[0], slot=2))   # a late retransmission of `old`
    assert h1.recv(1, timeout=0.5) == []
    assert read_stats(bed.conn("s1"), 2)["stale"] - before["stale"] == 1
    # the slot still holds the new sum: a duplicate of `new` gets it back
    h2.send(contribution(bed, 2, 1, new, v_new[1], slot=2))
    assert h2.recv(1)[0]["values"] == [a + b for a, b in zip(*v_new, strict=True)]


def test_sequence_numbers_wrap(bed):
    h1, h2 = bed.agents["h1"], bed.agents["h2"]
    # an unused slot holds seq 0; each of these is "newer" than the one before (serial
    # arithmetic), the last one across the 2^32 wrap
    for seq in (0x7FFFFFFF, 0xFFFFFFF0, 5):
        for rank, agent in enumerate((h1, h2)):
            agent.send(contribution(bed, 2, rank, seq, [rank + 1] * AGG_VECLEN, slot=4))
        for agent in (h1, h2):
            [res] = agent.recv(1)
            assert res["seq"] == seq and res["values"] == [3] * AGG_VECLEN


def test_saturation_is_reported(bed):
    before = read_stats(bed.conn("s1"), 2)
    seq = fresh_seq()
    a = [INT32_MAX - 10, INT32_MIN + 5, 100, -100] + [0] * (AGG_VECLEN - 4)
    b = [100, -100, INT32_MAX - 100, 50] + [1] * (AGG_VECLEN - 4)
    bed.agents["h1"].send(contribution(bed, 2, 0, seq, a, slot=5))
    bed.agents["h2"].send(contribution(bed, 2, 1, seq, b, slot=5))
    for host in ("h1", "h2"):
        [res] = bed.agents[host].recv(1)
        assert res["flags"] == AGG_FLAG_RESULT | AGG_FLAG_SATURATED
        assert res["values"][:4] == [INT32_MAX, INT32_MIN, INT32_MAX, -50]
        assert res["values"][4:] == [1] * (AGG_VECLEN - 4)
    after = read_stats(bed.conn("s1"), 2)
    assert after["saturated"] - before["saturated"] == 1
    # the flag belongs to that use of the slot only
    seq2 = fresh_seq(2 * SLOTS)
    for rank, host in enumerate(("h1", "h2")):
        bed.agents[host].send(contribution(bed, 2, rank, seq2, [1] * AGG_VECLEN, slot=5))
    assert bed.agents["h1"].recv(1)[0]["flags"] == AGG_FLAG_RESULT
    bed.agents["h2"].recv(1)


def test_ordinary_traffic_still_forwarded(bed):
    proc = bed.host_run("h5", ["ping", "-c", "2", "-i", "0.2", "-W", "2", bed.ip("h1")],
                        check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # UDP in the aggregation port range for a job the switch does not know: forwarded as is
    pkt = contribution(bed, 2, 0, fresh_seq(), list(range(AGG_VECLEN)))
    pkt.update(job=60, port=ORDINARY_PORT, dst=bed.ip("h1"))
    bed.agents["h5"].send(pkt)
    [res] = bed.agents["h1"].recv(1)
    assert res["src"] == bed.ip("h5") and res["port"] == ORDINARY_PORT
    assert res["job"] == 60 and res["flags"] == 0 and res["values"] == list(range(AGG_VECLEN))
