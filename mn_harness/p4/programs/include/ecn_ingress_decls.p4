/* ecn_ingress_decls.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Inside MyIngress: proxy ARP,
 * IPv4 forwarding (and the egress queue: small packets to QUEUE_SMALL), job classification,
 * port_enq. */
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

table ipv4_lpm {
    key = { hdr.ipv4.dstAddr: lpm; }
    actions = { forward; drop; }
    default_action = drop();
    size = 4096;
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
