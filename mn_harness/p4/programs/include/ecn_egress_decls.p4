/* ecn_egress_decls.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Inside MyEgress: telemetry
 * counters and the per-port ECN / histogram configuration. */
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
