"""Not a test module: shared data for the BMv2-free unit tests in tests/p4/.

A hand-written P4Info shaped like mn_harness/p4/programs/ecn_telemetry.p4's (same names, ids made
up), so those tests need no p4c. tests/p4/test_ecn_telemetry_bmv2.py checks the real P4Info has
the names the harness uses."""

P4INFO_TEXT = """
pkg_info { arch: "v1model" }
tables {
  preamble { id: 1 name: "MyIngress.arp_responder" alias: "arp_responder" }
  match_fields { id: 1 name: "standard_metadata.ingress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 11 } action_refs { id: 10 }
  size: 32
}
tables {
  preamble { id: 2 name: "MyIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 12 } action_refs { id: 10 }
  size: 4096
}
tables {
  preamble { id: 3 name: "MyIngress.job_classify" alias: "job_classify" }
  match_fields { id: 1 name: "hdr.ipv4.srcAddr" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 2 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 3 name: "hdr.ipv4.protocol" bitwidth: 8 match_type: TERNARY }
  match_fields { id: 4 name: "l4_src" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 5 name: "l4_dst" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 6 name: "hdr.ipv4.dscp" bitwidth: 6 match_type: TERNARY }
  action_refs { id: 13 } action_refs { id: 14 }
  size: 1024
}
tables {
  preamble { id: 4 name: "MyEgress.egress_port_cfg" alias: "egress_port_cfg" }
  match_fields { id: 1 name: "standard_metadata.egress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 15 }
  size: 32
}
tables {
  preamble { id: 5 name: "MyIngress.range_demo" alias: "range_demo" }
  match_fields { id: 1 name: "meta.x" bitwidth: 16 match_type: RANGE }
  action_refs { id: 10 }
  size: 8
}
actions { preamble { id: 10 name: "MyIngress.drop" alias: "drop" } }
actions {
  preamble { id: 11 name: "MyIngress.arp_reply" alias: "arp_reply" }
  params { id: 1 name: "port_mac" bitwidth: 48 }
}
actions {
  preamble { id: 12 name: "MyIngress.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 }
  params { id: 2 name: "src_mac" bitwidth: 48 }
  params { id: 3 name: "dst_mac" bitwidth: 48 }
}
actions {
  preamble { id: 13 name: "MyIngress.set_job" alias: "set_job" }
  params { id: 1 name: "job" bitwidth: 6 }
}
actions { preamble { id: 14 name: "MyIngress.job_from_dscp" alias: "job_from_dscp" } }
actions {
  preamble { id: 15 name: "MyEgress.set_port_cfg" alias: "set_port_cfg" }
  params { id: 1 name: "threshold" bitwidth: 19 }
  params { id: 2 name: "bucket_shift" bitwidth: 5 }
}
counters { preamble { id: 20 name: "MyIngress.port_enq" alias: "port_enq" }
           spec { unit: BOTH } size: 32 }
counters { preamble { id: 21 name: "MyEgress.port_tx" alias: "port_tx" }
           spec { unit: BOTH } size: 32 }
counters { preamble { id: 22 name: "MyEgress.port_marks" alias: "port_marks" }
           spec { unit: PACKETS } size: 32 }
counters { preamble { id: 23 name: "MyEgress.qdepth_hist" alias: "qdepth_hist" }
           spec { unit: PACKETS } size: 2048 }
counters { preamble { id: 24 name: "MyEgress.job_tx" alias: "job_tx" }
           spec { unit: BOTH } size: 2048 }
counters { preamble { id: 25 name: "MyEgress.job_marks" alias: "job_marks" }
           spec { unit: PACKETS } size: 2048 }
counters { preamble { id: 26 name: "Other.port_tx" alias: "Other.port_tx" }
           spec { unit: BOTH } size: 4 }
"""
