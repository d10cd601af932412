/* ecn_ingress_apply.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Statements of MyIngress.apply
 * for ARP / IPv4 / other packets. */
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

