/* ecn_parser_states.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Parser states start,
 * parse_arp, parse_ipv4; the including parser defines parse_l4. */
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
