/* ecn_egress_apply.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Statements of MyEgress.apply:
 * histogram, ECN marking, counters. enq_qdepth is the depth of the packet's own priority queue,
 * so the histogram and marking only use packets of the data queue: they mean "data queue depth"
 * (small packets bypass it in QUEUE_SMALL; pure ACKs are not-ECT anyway). */
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
        if (hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE
                && standard_metadata.enq_qdepth >= ecn_threshold) {
            hdr.ipv4.ecn = ECN_CE;
            port_marks.count(port);
            job_marks.count(job_index);
        }
    }
    port_tx.count(port);
    job_tx.count(job_index);
}
