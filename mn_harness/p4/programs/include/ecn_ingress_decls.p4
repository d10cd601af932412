/* ecn_ingress_decls.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Inside MyIngress: proxy ARP,
 * IPv4 forwarding (and the egress queue: small packets to QUEUE_SMALL), ECMP, job
 * classification, port_enq.
 *
 * ECMP: an `ipv4_lpm` entry may instead of `forward` run `ecmp_group(base, count, seed)`: the
 * member index base + ((crc32(srcAddr, dstAddr, protocol, l4_src, l4_dst, seed) * (seed | 1))
 * mod 2^32 >> 16) % count selects an `ecmp_members` entry, whose `forward` is the next hop. The harness computes the same
 * hash in Python (mn_harness/p4/ecmp.py) to know each flow's path; the metadata struct of the
 * including program needs `bit<16> ecmp_member`. */
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
