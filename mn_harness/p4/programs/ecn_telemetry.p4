/* ecn_telemetry.p4 -- IPv4 router with ECN marking and queue/job telemetry (P4_16, v1model, BMv2).
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

#include "include/ecn_headers.p4"

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
#include "include/ecn_parser_states.p4"
    state parse_l4 {
        packet.extract(hdr.l4);
        meta.l4_src = hdr.l4.srcPort;
        meta.l4_dst = hdr.l4.dstPort;
        transition accept;
    }
}

#include "include/ecn_checksum.p4"

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

#include "include/ecn_ingress_decls.p4"

    apply {
#include "include/ecn_ingress_apply.p4"
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

#include "include/ecn_egress_decls.p4"

    apply {
#include "include/ecn_egress_apply.p4"
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
