/* aggregation.p4 -- in-network aggregation (SwitchML/ATP style) for inc_allreduce, plus the
 * ordinary forwarding, ECN marking and telemetry of ecn_telemetry.p4 (P4_16, v1model, BMv2).
 *
 * The forwarding part is ecn_telemetry.p4's own code, included textually from mn_harness/p4/programs/include/
 * (same table, action and counter names), so the harness installs the same entries and reads the
 * same telemetry; aggregation and ordinary jobs share one switch.
 *
 * Packets: UDP to a destination port in AGG_PORT_BASE..+63 (48640..48703) carrying
 *
 *   agg_t (12 bytes)   job      bit<16>  job id (1..63), its own slot range and multicast group
 *                      slot     bit<16>  slot index inside the job's range (0..slot_count-1)
 *                      seq      bit<32>  chunk sequence number, increasing per job (serial
 *                                        arithmetic: wraps)
 *                      worker   bit<8>   rank 0..31 (one bit of the slot's bitmap)
 *                      nworkers bit<8>   must equal the job's installed worker count
 *                      flags    bit<8>   bit0 RESULT (set by the switch), bit1 SATURATED
 *                      pad      bit<8>
 *   vec_t (4*AGG_VECLEN)  AGG_VECLEN signed 32-bit fixed-point values, big endian
 *
 * AGG_VECLEN = 64 (256 bytes of values per packet; -DAGG_VECLEN=32 also compiles): on BMv2 every
 * element costs one register read, a saturating add and one register write, but the fixed cost
 * of a packet (parse, ~6 table lookups, queues, multicast, the Python sender) is larger, so more
 * values per packet give more aggregated bytes per second, and the 54 bytes of Ethernet/IPv4/UDP/
 * agg headers are 21% of a 64-value packet instead of 42% of a 32-value one (ATP: 31, SwitchML:
 * 32/64 on Tofino, where the limit is pipeline stages, not CPU). docs/inc.md has the numbers.
 *
 * Slots. `agg_job` (exact on job id and UDP destination port, installed over P4Runtime from the
 * YAML job) gives the job's slot base and slot count in the shared pool of AGG_POOL slots, its
 * worker count and its multicast group. Physical slot = base + slot, checked against the count,
 * so jobs cannot touch each other's slots; anything that does not match an `agg_job` entry is
 * forwarded like ordinary traffic. Per slot (registers): seq, worker bitmap, count, sticky
 * saturation flag, and AGG_VECLEN values.
 *
 * Per contribution (all in one @atomic block):
 *   d = pkt.seq - slot.seq (mod 2^32)
 *   d == 0, worker bit clear   add the values, set the bit, count+1; count == n: multicast
 *                              the sum (RESULT) to the job's group
 *   d == 0, bit set, complete  the worker lost the result: send the stored sum back to it only
 *   d == 0, bit set, partial   duplicate (retransmission): dropped, not added twice
 *   0 < d < 2^31               a new chunk reuses the slot: the slot restarts with this packet
 *                              (bitmap = this worker, values = its values)
 *   otherwise (older)          stale retransmission of an earlier use of the slot: dropped
 * Reuse is safe because the worker keeps two copies per window position (slot = 2*lane + the
 * parity of seq/lane count) and sends chunk c + window only after it has the result of c: a slot
 * is overwritten (c + 2*window) only after every worker has received the result of c, so a
 * worker that lost a result always finds it still stored (the SwitchML shadow copy).
 *
 * Arithmetic: saturating signed 32-bit addition (`|+|`). A saturated element sets the slot's
 * sticky flag, the result carries SATURATED and `agg_stats` counts it: never silent. Values are
 * fixed point (the worker's scale); the sum of n values each below 2^31/n cannot saturate.
 *
 * Results: `agg_result_dst` (egress, exact on job id and replica id = rank) rewrites each
 * multicast copy's addresses to the worker (dst IP/MAC) from its gateway (src IP = the address
 * the worker sent to, src MAC = the switch port MAC). TTL 64, UDP checksum 0 (allowed for IPv4).
 * Result packets then go through the normal egress telemetry/ECN (job id = agg job id).
 * Queue: results (and re-sent results) stay in the data queue (priority QUEUE_DATA, never set
 * here; ~310-byte frames with 64 values, above the 128-byte small-packet limit): they are the
 * job's payload, so they must wait behind, be marked by and show up in the telemetry of the
 * bottleneck queue like any data; the small queue is paced in 142-byte frames and would let
 * them exceed the link rate ~2x. Contributions are consumed here and never queued.
 *
 * Counters: agg_stats[job * 8 + k], k = 0 contributions added, 1 duplicates dropped, 2 stale
 * dropped, 3 results multicast, 4 saturated results, 5 results re-sent to one worker, 6 bad
 * (slot out of range, worker >= n, nworkers mismatch, truncated vector).
 *
 * Limits: 32 workers per job (bitmap), jobs 1..63, AGG_POOL slots shared by all jobs, one
 * aggregation switch per job (workers send to their own gateway, which is this switch).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/ecn_headers.p4"

#ifndef AGG_VECLEN
#define AGG_VECLEN 64
#endif
#define AGG_POOL 2048
#define AGG_STATS_KINDS 8

const bit<16> AGG_PORT_BASE = 0xBE00;  /* 48640 */
const bit<16> AGG_PORT_MASK = 0xFFC0;  /* 64 ports */
const bit<8>  AGG_FLAG_RESULT = 1;
const bit<8>  AGG_FLAG_SATURATED = 2;
const bit<2>  AGG_MODE_NONE = 0;
const bit<2>  AGG_MODE_MCAST = 1;
const bit<2>  AGG_MODE_UNICAST = 2;

header udp_rest_t {
    bit<16> length;
    bit<16> checksum;
}

header agg_t {
    bit<16> job;
    bit<16> slot;
    bit<32> seq;
    bit<8>  worker;
    bit<8>  nworkers;
    bit<8>  flags;
    bit<8>  pad;
}

header vec_t {
    bit<32> v0;
    bit<32> v1;
    bit<32> v2;
    bit<32> v3;
    bit<32> v4;
    bit<32> v5;
    bit<32> v6;
    bit<32> v7;
    bit<32> v8;
    bit<32> v9;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
#if AGG_VECLEN == 64
    bit<32> v32;
    bit<32> v33;
    bit<32> v34;
    bit<32> v35;
    bit<32> v36;
    bit<32> v37;
    bit<32> v38;
    bit<32> v39;
    bit<32> v40;
    bit<32> v41;
    bit<32> v42;
    bit<32> v43;
    bit<32> v44;
    bit<32> v45;
    bit<32> v46;
    bit<32> v47;
    bit<32> v48;
    bit<32> v49;
    bit<32> v50;
    bit<32> v51;
    bit<32> v52;
    bit<32> v53;
    bit<32> v54;
    bit<32> v55;
    bit<32> v56;
    bit<32> v57;
    bit<32> v58;
    bit<32> v59;
    bit<32> v60;
    bit<32> v61;
    bit<32> v62;
    bit<32> v63;
#endif
}

struct headers_t {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    l4_ports_t l4;
    udp_rest_t udp;
    agg_t      agg;
    vec_t      vec;
}

struct metadata_t {
    bit<16> l4_src;
    bit<16> l4_dst;
    bit<6>  job;
    bit<16> ecmp_member;
    bit<2>  agg_mode;
    bit<1>  agg_hit;
    bit<32> slot_base;
    bit<16> slot_count;
    bit<8>  nworkers;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
#include "include/ecn_parser_states.p4"
    state parse_l4 {
        packet.extract(hdr.l4);
        meta.l4_src = hdr.l4.srcPort;
        meta.l4_dst = hdr.l4.dstPort;
        transition select(hdr.ipv4.protocol, hdr.l4.dstPort) {
            (PROTO_UDP, AGG_PORT_BASE &&& AGG_PORT_MASK): parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.udp);
        packet.extract(hdr.agg);
        packet.extract(hdr.vec);
        transition accept;
    }
}

#include "include/ecn_checksum.p4"

/* One element of the vector: read, (keep & old) |+| (add & new), write back, copy to the
 * packet; `satacc` collects the bits where the saturating and the wrapping sums differ. */
#define AGG_ELEM(i) \
    agg_values.read(cur, vbase + i); \
    a = (int<32>)(cur & keep); \
    b = (int<32>)(hdr.vec.v##i & add); \
    s = a |+| b; \
    satacc = satacc | ((bit<32>)s ^ ((bit<32>)a + (bit<32>)b)); \
    agg_values.write(vbase + i, (bit<32>)s); \
    hdr.vec.v##i = (bit<32>)s;

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

#include "include/ecn_ingress_decls.p4"

    register<bit<32>>(AGG_POOL * AGG_VECLEN) agg_values;
    register<bit<32>>(AGG_POOL) agg_seq;
    register<bit<32>>(AGG_POOL) agg_bitmap;
    register<bit<8>>(AGG_POOL) agg_count;
    register<bit<8>>(AGG_POOL) agg_sat;
    counter(MAX_JOBS * AGG_STATS_KINDS, CounterType.packets) agg_stats;

    action agg_set_job(bit<32> slot_base, bit<16> slot_count, bit<8> nworkers,
                       bit<16> mcast_group) {
        meta.agg_hit = 1;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.nworkers = nworkers;
        standard_metadata.mcast_grp = mcast_group;
    }

    table agg_job {
        key = {
            hdr.agg.job: exact;
            hdr.l4.dstPort: exact @name("udp_dst");
        }
        actions = { agg_set_job; NoAction; }
        default_action = NoAction();
        size = MAX_JOBS;
    }

    action agg_drop() {
        mark_to_drop(standard_metadata);
        standard_metadata.mcast_grp = 0;
    }

    apply {
        if (hdr.agg.isValid() && (hdr.agg.flags & AGG_FLAG_RESULT) == 0) {
            agg_job.apply();
        }
        if (meta.agg_hit == 1) {
            bit<32> stats = ((bit<32>)hdr.agg.job & (MAX_JOBS - 1)) * AGG_STATS_KINDS;
            meta.job = (bit<6>)hdr.agg.job;
            if (!hdr.vec.isValid() || hdr.agg.slot >= meta.slot_count
                    || hdr.agg.worker >= meta.nworkers || hdr.agg.nworkers != meta.nworkers
                    || hdr.agg.worker >= 32) {
                agg_drop();
                agg_stats.count(stats + 6);
            } else {
                bit<32> phys = meta.slot_base + (bit<32>)hdr.agg.slot;
                bit<32> vbase = phys * AGG_VECLEN;
                bit<32> mybit = (bit<32>)1 << hdr.agg.worker;
                bit<32> slot_seq;
                bit<32> bitmap;
                bit<8>  count;
                bit<8>  sat;
                bit<32> keep = 0xFFFFFFFF;
                bit<32> add = 0xFFFFFFFF;
                bit<32> satacc = 0;
                bit<32> cur;
                int<32> a;
                int<32> b;
                int<32> s;
                bit<1>  run = 1;
                bit<1>  added = 0;
                @atomic {
                    agg_seq.read(slot_seq, phys);
                    agg_bitmap.read(bitmap, phys);
                    agg_count.read(count, phys);
                    agg_sat.read(sat, phys);
                    bit<32> d = hdr.agg.seq - slot_seq;
                    if (d != 0 && d < 0x80000000) {
                        /* a new chunk in this slot: restart it with this packet */
                        slot_seq = hdr.agg.seq;
                        bitmap = 0;
                        count = 0;
                        sat = 0;
                        keep = 0;
                    }
                    if (d >= 0x80000000) {
                        run = 0;
                        agg_drop();
                        agg_stats.count(stats + 2);
                    } else if ((bitmap & mybit) != 0) {
                        if (count == meta.nworkers) {
                            /* the worker lost the result: read the stored sum back to it */
                            add = 0;
                            meta.agg_mode = AGG_MODE_UNICAST;
                            agg_stats.count(stats + 5);
                        } else {
                            run = 0;
                            agg_drop();
                            agg_stats.count(stats + 1);
                        }
                    } else {
                        added = 1;
                        bitmap = bitmap | mybit;
                        count = count + 1;
                        agg_stats.count(stats + 0);
                    }
                    if (run == 1) {
            AGG_ELEM(0)
            AGG_ELEM(1)
            AGG_ELEM(2)
            AGG_ELEM(3)
            AGG_ELEM(4)
            AGG_ELEM(5)
            AGG_ELEM(6)
            AGG_ELEM(7)
            AGG_ELEM(8)
            AGG_ELEM(9)
            AGG_ELEM(10)
            AGG_ELEM(11)
            AGG_ELEM(12)
            AGG_ELEM(13)
            AGG_ELEM(14)
            AGG_ELEM(15)
            AGG_ELEM(16)
            AGG_ELEM(17)
            AGG_ELEM(18)
            AGG_ELEM(19)
            AGG_ELEM(20)
            AGG_ELEM(21)
            AGG_ELEM(22)
            AGG_ELEM(23)
            AGG_ELEM(24)
            AGG_ELEM(25)
            AGG_ELEM(26)
            AGG_ELEM(27)
            AGG_ELEM(28)
            AGG_ELEM(29)
            AGG_ELEM(30)
            AGG_ELEM(31)
#if AGG_VECLEN == 64
            AGG_ELEM(32)
            AGG_ELEM(33)
            AGG_ELEM(34)
            AGG_ELEM(35)
            AGG_ELEM(36)
            AGG_ELEM(37)
            AGG_ELEM(38)
            AGG_ELEM(39)
            AGG_ELEM(40)
            AGG_ELEM(41)
            AGG_ELEM(42)
            AGG_ELEM(43)
            AGG_ELEM(44)
            AGG_ELEM(45)
            AGG_ELEM(46)
            AGG_ELEM(47)
            AGG_ELEM(48)
            AGG_ELEM(49)
            AGG_ELEM(50)
            AGG_ELEM(51)
            AGG_ELEM(52)
            AGG_ELEM(53)
            AGG_ELEM(54)
            AGG_ELEM(55)
            AGG_ELEM(56)
            AGG_ELEM(57)
            AGG_ELEM(58)
            AGG_ELEM(59)
            AGG_ELEM(60)
            AGG_ELEM(61)
            AGG_ELEM(62)
            AGG_ELEM(63)
#endif
                    }
                    if (added == 1) {
                        if (satacc != 0) {
                            sat = 1;
                        }
                        agg_seq.write(phys, slot_seq);
                        agg_bitmap.write(phys, bitmap);
                        agg_count.write(phys, count);
                        agg_sat.write(phys, sat);
                    }
                }
                if (sat != 0) {
                    hdr.agg.flags = hdr.agg.flags | AGG_FLAG_SATURATED;
                }
                if (added == 1) {
                    if (count == meta.nworkers) {
                        meta.agg_mode = AGG_MODE_MCAST;   /* mcast_grp set by agg_job */
                        agg_stats.count(stats + 3);
                        if (sat != 0) {
                            agg_stats.count(stats + 4);
                        }
                    } else {
                        agg_drop();
                    }
                }
                if (meta.agg_mode == AGG_MODE_UNICAST) {
                    ip4_t ip = hdr.ipv4.srcAddr;
                    mac_t mac = hdr.ethernet.srcAddr;
                    hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                    hdr.ipv4.dstAddr = ip;
                    hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
                    hdr.ethernet.dstAddr = mac;
                    bit<16> port = hdr.l4.srcPort;
                    hdr.l4.srcPort = hdr.l4.dstPort;
                    hdr.l4.dstPort = port;
                    standard_metadata.mcast_grp = 0;
                    standard_metadata.egress_spec = standard_metadata.ingress_port;
                    port_enq.count((bit<32>)(standard_metadata.egress_spec & PORT_MASK));
                }
            }
        } else {
#include "include/ecn_ingress_apply.p4"
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

#include "include/ecn_egress_decls.p4"

    action set_result_dst(ip4_t dst_ip, ip4_t src_ip, mac_t dst_mac, mac_t src_mac) {
        hdr.ipv4.dstAddr = dst_ip;
        hdr.ipv4.srcAddr = src_ip;
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ethernet.srcAddr = src_mac;
    }

    action result_drop() {
        mark_to_drop(standard_metadata);
    }

    table agg_result_dst {
        key = {
            hdr.agg.job: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { set_result_dst; result_drop; }
        default_action = result_drop();
        size = MAX_JOBS * 32;
    }

    apply {
        if (meta.agg_mode != AGG_MODE_NONE) {
            if (meta.agg_mode == AGG_MODE_MCAST) {
                agg_result_dst.apply();
            }
            hdr.agg.flags = hdr.agg.flags | AGG_FLAG_RESULT;
            hdr.ipv4.ttl = 64;
            hdr.udp.checksum = 0;
        }
#include "include/ecn_egress_apply.p4"
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
        packet.emit(hdr.vec);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
