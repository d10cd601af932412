/* dequeue_ecn.p4 -- ecn_telemetry.p4 marking at dequeue: an ECT packet of the data queue leaves
 * as CE when the queue it leaves behind (`deq_qdepth`) holds at least the port's threshold, not
 * when the queue it joined (`enq_qdepth`) did. The marks then ride on the packets leaving a long
 * queue, so senders hear of it a queue's worth of time sooner, and a queue that drains stops
 * being marked at once ("dequeue marking": Wu et al., Tuning ECN for Data Center Networks,
 * CoNEXT 2012). The one change is in MyEgress (marked "dequeue marking" below); the depth
 * histogram behind queue.csv still counts the depth at enqueue, so queue.csv means the same as
 * with the shipped program.
 *
 * The rest is `mn-harness p4 new examples/p4 --name dequeue_ecn` as it came: the shipped
 * program with its includes inlined, keeping the tables, actions and counters the harness
 * programs and reads by name (docs/p4.md, "The program contract"; `mn-harness validate
 * experiment.yaml` checks them). test_dequeue_ecn.py and dequeue_ecn.p4test.yaml test it. What
 * follows is the shipped program's own description, marking at enqueue included. */
/* dequeue_ecn.p4 (from ecn_telemetry.p4) -- IPv4 router with ECN marking and queue/job telemetry (P4_16, v1model, BMv2).
 *
 * Forwarding
 *   - ARP: the switch answers every ARP request arriving on a port that has an `arp_responder`
 *     entry with that port's MAC (proxy ARP). Hosts therefore need no static neighbour entries;
 *     they send everything to the switch, which routes. Other ARP packets are dropped.
 *   - IPv4: `ipv4_lpm` (dst address, LPM) -> forward(port, src MAC, dst MAC). The harness installs
 *     /32 entries from the topology's shortest paths; dst MAC is the host's MAC or the next
 *     switch's port MAC (switches do not check the destination MAC, so either works).
 *   - ECMP (`routing: ecmp`): a host with several equal-cost next hops gets
 *     ecmp_group(base, count, seed) instead: crc32 over (src, dst, protocol, L4 ports, seed)
 *     modulo count picks one of `count` `ecmp_members` entries from `base` on, each a forward()
 *     to one next hop, so every packet of a flow takes the same path and flows spread over the
 *     paths (include/ecn_ingress_decls.p4).
 *   - TTL: packets arriving with TTL <= 1 are dropped; otherwise TTL is decremented. The IPv4
 *     header checksum is recomputed after egress, so TTL and ECN changes are both covered.
 *   - Everything that is neither IPv4 nor ARP (IPv6 router solicitations, LLDP...) is dropped.
 *
 * Egress queues (two per port: the switch must run with `--priority-queues 2`)
 *   BMv2 rate-limits a queue in packets/s, not bytes. With one queue per port, set to the link
 *   rate in 1514-byte frames, the pure ACKs of the reverse direction (about a third of the packets
 *   on a bidirectional ring link) each took a full frame's slot, so data got ~2/3 of the link.
 *   `forward` therefore puts small packets (IPv4 total length <= SMALL_PKT_MAX_LEN = 128 bytes:
 *   pure ACKs, pings) and `arp_reply` its replies into standard_metadata.priority = QUEUE_SMALL
 *   (1), everything else into QUEUE_DATA (0). BMv2 serves the highest priority first, each
 *   priority queue paced by its own rate: the harness sets QUEUE_DATA to the link's `queue` and
 *   `bw` in 1514-byte frames (as before) and QUEUE_SMALL to the link's byte rate in 142-byte
 *   frames (the largest small packet), so data gets the whole link and small packets ride next
 *   to it. A packet whose priority exceeds the switch's queue count is dropped by BMv2.
 *
 * ECN
 *   `egress_port_cfg` (exact on egress_port, default action modifiable over P4Runtime, so a
 *   threshold can be set per port or for the whole switch) gives `ecn_threshold` in packets. An
 *   ECN-capable packet (ECT(0)=2 or ECT(1)=1) of the data queue whose `enq_qdepth` (depth of its
 *   egress queue when it was enqueued, packets; BMv2 gives the depth of the packet's own priority
 *   queue) is >= the threshold leaves with CE (3). Packets of the small queue are never marked
 *   (they did not wait behind the data; pure ACKs are not-ECT anyway). Not-ECT (0) packets are
 *   never changed; CE packets stay CE. The initial default threshold is 2^19-1, i.e. no marking
 *   until the controller writes one. The bottleneck queue must be BMv2's own (set_queue_rate /
 *   set_queue_depth), otherwise enq_qdepth stays near 0.
 *
 * Jobs
 *   `job_classify` (ternary on src/dst address, protocol, L4 ports, DSCP; with priorities) sets a
 *   job id 0..63 from 5-tuple entries the harness installs. If no entry matches, the default
 *   action takes the job id from the DSCP the worker set (0 = unclassified traffic).
 *
 * Telemetry: why P4Runtime counters (and not registers, digests or cloned reports)
 *   BMv2's P4Runtime server cannot read registers (p4lang/PI#376), so all state the collector
 *   reads is in indirect counters, read over the same gRPC connection the controller already has:
 *     port_enq    [port]               packets/bytes sent towards the egress queue (ingress)
 *     port_tx     [port]               packets/bytes that left the queue (egress)
 *                                      port_enq - port_tx = queue occupancy (both queues)
 *                                      + tail drops
 *     port_marks  [port]               packets this switch marked CE on that port
 *     qdepth_hist [port*64 + bucket]   data-queue packets that saw a data-queue depth in bucket
 *                                      min(enq_qdepth >> shift, 63); shift is per port from
 *                                      `egress_port_cfg`, so 64 buckets cover the configured queue
 *                                      (small-queue packets are not counted: the histogram is
 *                                      the data queue's)
 *     job_tx      [job*32 + port]      packets/bytes of a job leaving through a port
 *     job_marks   [job*32 + port]      packets of a job marked CE on that port
 *   A queue depth is a gauge and a counter only adds, hence the histogram: the difference of two
 *   reads of qdepth_hist is the distribution of the depth seen by *every* packet that went
 *   through the port in that interval, from which the collector takes the mean and the maximum
 *   (to the bucket width) without sampling aliasing.
 *   Cost on the switch: a few counter increments per packet, nothing else; the data-path threads
 *   never wait for the collector. Reading is done by the PI gRPC thread, one Read RPC per sample
 *   asking only for the cells of the watched ports and jobs. Measured on 2 cores (BMv2 1.15.5,
 *   mn_harness.p4.telemetry with a pre-serialized request): 166 cells (2 ports, 8 jobs) take
 *   ~1.3 ms per sample, i.e. ~780 samples/s flat out; at 50 samples/s that is ~5% of a core in
 *   the collector and ~1% in the switch.
 *   Alternatives rejected: cloned per-packet telemetry reports to a collector port double the
 *   packet rate BMv2 must handle (BMv2 forwards only ~1e4-1e5 packets/s) and need an extra port
 *   and a raw-socket reader per switch; rate-limited clones still only give point samples;
 *   digests go through the same gRPC stream with an ack protocol and are meant for learning
 *   events, not periodic state.
 *
 * Limits: ports 0..31 (egress_port is masked to 5 bits for the per-port arrays), jobs 0..63.
 */
#include <core.p4>
#include <v1model.p4>

/* --- ecn_headers.p4 --- */
#define MAX_PORTS 32
#define PORT_MASK 31
#define MAX_JOBS 64
#define QBUCKETS 64
#define QBUCKET_MAX 63
#define ECMP_MEMBERS 1024

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;
const bit<16> ARP_REQUEST = 1;
const bit<16> ARP_REPLY   = 2;
const bit<2>  ECN_NOT_ECT = 0;
const bit<2>  ECN_CE      = 3;

/* Egress queues: the switch runs with `--priority-queues 2`; BMv2 serves the highest priority
 * first, each priority queue with its own depth and packets/s rate (set per port over Thrift).
 * Small packets (IPv4 total length <= SMALL_PKT_MAX_LEN: pure TCP ACKs, pings, ARP replies) go
 * to QUEUE_SMALL, everything else to QUEUE_DATA, whose depth is what ECN marking and qdepth_hist
 * look at. */
const bit<3>  QUEUE_DATA  = 0;
const bit<3>  QUEUE_SMALL = 1;
const bit<16> SMALL_PKT_MAX_LEN = 128;

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t {
    mac_t   dstAddr;
    mac_t   srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    mac_t   sha;
    ip4_t   spa;
    mac_t   tha;
    ip4_t   tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    ip4_t   srcAddr;
    ip4_t   dstAddr;
}

/* First 4 bytes of TCP and UDP: the ports. Only parsed when the IPv4 header has no options. */
header l4_ports_t {
    bit<16> srcPort;
    bit<16> dstPort;
}
/* --- end of ecn_headers.p4 --- */

struct headers_t {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    l4_ports_t l4;
}

struct metadata_t {
    bit<16> l4_src;
    bit<16> l4_dst;
    bit<6>  job;
    bit<16> ecmp_member;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
/* --- ecn_parser_states.p4 --- */
state start {
    packet.extract(hdr.ethernet);
    transition select(hdr.ethernet.etherType) {
        TYPE_IPV4: parse_ipv4;
        TYPE_ARP: parse_arp;
        default: accept;
    }
}
state parse_arp {
    packet.extract(hdr.arp);
    transition accept;
}
state parse_ipv4 {
    packet.extract(hdr.ipv4);
    transition select(hdr.ipv4.ihl, hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
        (5, 0, PROTO_TCP): parse_l4;
        (5, 0, PROTO_UDP): parse_l4;
        default: accept;
    }
}
/* --- end of ecn_parser_states.p4 --- */
    state parse_l4 {
        packet.extract(hdr.l4);
        meta.l4_src = hdr.l4.srcPort;
        meta.l4_dst = hdr.l4.dstPort;
        transition accept;
    }
}

/* --- ecn_checksum.p4 --- */
control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}
/* --- end of ecn_checksum.p4 --- */

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

/* --- ecn_ingress_decls.p4 --- */
counter(MAX_PORTS, CounterType.packets_and_bytes) port_enq;

action drop() {
    mark_to_drop(standard_metadata);
}

action arp_reply(mac_t port_mac) {
    ip4_t target = hdr.arp.tpa;
    hdr.arp.oper = ARP_REPLY;
    hdr.arp.tha = hdr.arp.sha;
    hdr.arp.tpa = hdr.arp.spa;
    hdr.arp.sha = port_mac;
    hdr.arp.spa = target;
    hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
    hdr.ethernet.srcAddr = port_mac;
    standard_metadata.egress_spec = standard_metadata.ingress_port;
    standard_metadata.priority = QUEUE_SMALL;
}

table arp_responder {
    key = { standard_metadata.ingress_port: exact; }
    actions = { arp_reply; drop; }
    default_action = drop();
    size = MAX_PORTS;
}

action forward(port_t port, mac_t src_mac, mac_t dst_mac) {
    standard_metadata.egress_spec = port;
    hdr.ethernet.srcAddr = src_mac;
    hdr.ethernet.dstAddr = dst_mac;
    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    if (hdr.ipv4.totalLen <= SMALL_PKT_MAX_LEN) {
        standard_metadata.priority = QUEUE_SMALL;
    } else {
        standard_metadata.priority = QUEUE_DATA;
    }
}

action ecmp_group(bit<16> base, bit<16> count, bit<32> seed) {
    /* CRC-32 is affine: a seed inside its input only XORs a constant into the result, which for
     * two next hops flips every flow's choice at once (a new seed, the same sharing). So the
     * seed also multiplies the CRC (odd, mod 2^32) and the member is taken from the product's
     * high half, which depends on the seed non-linearly. */
    bit<32> crc;
    hash(crc, HashAlgorithm.crc32, 32w0,
         { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, meta.l4_src, meta.l4_dst, seed },
         64w0x100000000);
    bit<32> mixed = (crc * (seed | 32w1)) >> 16;
    /* the identity "hash" of one field is its value: base + mixed % count */
    hash(meta.ecmp_member, HashAlgorithm.identity, base, { mixed }, count);
}

table ipv4_lpm {
    key = { hdr.ipv4.dstAddr: lpm; }
    actions = { forward; ecmp_group; drop; }
    default_action = drop();
    size = 4096;
}

table ecmp_members {
    key = { meta.ecmp_member: exact; }
    actions = { forward; drop; }
    default_action = drop();
    size = ECMP_MEMBERS;
}

action set_job(bit<6> job) {
    meta.job = job;
}

action job_from_dscp() {
    meta.job = hdr.ipv4.dscp;
}

table job_classify {
    key = {
        hdr.ipv4.srcAddr: ternary;
        hdr.ipv4.dstAddr: ternary;
        hdr.ipv4.protocol: ternary;
        meta.l4_src: ternary @name("l4_src");
        meta.l4_dst: ternary @name("l4_dst");
        hdr.ipv4.dscp: ternary;
    }
    actions = { set_job; job_from_dscp; }
    default_action = job_from_dscp();
    size = 1024;
}
/* --- end of ecn_ingress_decls.p4 --- */

    apply {
/* --- ecn_ingress_apply.p4 --- */
if (hdr.arp.isValid()) {
    if (hdr.arp.oper == ARP_REQUEST && hdr.arp.ptype == TYPE_IPV4) {
        arp_responder.apply();
    } else {
        drop();
    }
} else if (hdr.ipv4.isValid()) {
    if (hdr.ipv4.ttl <= 1) {
        drop();
    } else {
        bool routed = false;
        switch (ipv4_lpm.apply().action_run) {
            forward: { routed = true; }
            ecmp_group: {
                if (ecmp_members.apply().hit) {
                    routed = true;
                }
            }
        }
        if (routed) {
            job_classify.apply();
            port_enq.count((bit<32>)(standard_metadata.egress_spec & PORT_MASK));
        }
    }
} else {
    drop();
}
/* --- end of ecn_ingress_apply.p4 --- */
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

/* --- ecn_egress_decls.p4 --- */
counter(MAX_PORTS, CounterType.packets_and_bytes) port_tx;
counter(MAX_PORTS, CounterType.packets) port_marks;
counter(MAX_PORTS * QBUCKETS, CounterType.packets) qdepth_hist;
counter(MAX_JOBS * MAX_PORTS, CounterType.packets_and_bytes) job_tx;
counter(MAX_JOBS * MAX_PORTS, CounterType.packets) job_marks;

bit<19> ecn_threshold = 0x7FFFF;
bit<5>  qbucket_shift = 0;

action set_port_cfg(bit<19> threshold, bit<5> bucket_shift) {
    ecn_threshold = threshold;
    qbucket_shift = bucket_shift;
}

table egress_port_cfg {
    key = { standard_metadata.egress_port: exact; }
    actions = { set_port_cfg; }
    default_action = set_port_cfg(0x7FFFF, 0);
    size = MAX_PORTS;
}
/* --- end of ecn_egress_decls.p4 --- */

    apply {
/* --- ecn_egress_apply.p4 --- */
if (hdr.ipv4.isValid()) {
    egress_port_cfg.apply();
    bit<32> port = (bit<32>)(standard_metadata.egress_port & PORT_MASK);
    bit<32> job_index = ((bit<32>)meta.job) * MAX_PORTS + port;
    if (standard_metadata.priority == QUEUE_DATA) {
        bit<19> bucket = standard_metadata.enq_qdepth >> qbucket_shift;
        if (bucket > QBUCKET_MAX) {
            bucket = QBUCKET_MAX;
        }
        qdepth_hist.count(port * QBUCKETS + (bit<32>)bucket);
        /* dequeue marking: the depth this packet leaves behind, not the one it found */
        if (hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE
                && standard_metadata.deq_qdepth >= ecn_threshold) {
            hdr.ipv4.ecn = ECN_CE;
            port_marks.count(port);
            job_marks.count(job_index);
        }
    }
    port_tx.count(port);
    job_tx.count(job_index);
}
/* --- end of ecn_egress_apply.p4 --- */
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
