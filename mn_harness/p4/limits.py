"""Every limit of the P4 programs that Python must also know, in one place.

The programs (mn_harness/p4/programs/) size their tables, counters and registers with these
numbers; the Python side (config validation, table entries, telemetry decoding, the BMv2 queue
set-up, the in-network aggregation worker) must use the same ones. tests/p4/test_limits.py
parses the `#define` / `const` values (and a few declarations) of the P4 sources and fails when
the two sides disagree, so change a limit in both places, never in one.

Standard library only: the worker inside each emulated host imports it."""

from __future__ import annotations

# -- frames ------------------------------------------------------------------------------------
FRAME_BYTES = 1514  # a full-MTU Ethernet frame (1500 B of IP + 14): what a bulk TCP flow sends.
#                     Queues are sized in it (HTB byte FIFO = queue x FRAME_BYTES) and BMv2's
#                     packets/s queue rates are computed for it.
ETHERNET_HEADER_BYTES = 14

# -- ecn_telemetry.p4 (programs/include/ecn_headers.p4) -----------------------------------------
MAX_PORTS = 32            # MAX_PORTS: ports 0..31 per switch (counter arrays, PORT_MASK = 31)
PORT_MASK = MAX_PORTS - 1
MAX_JOBS = 64             # MAX_JOBS: job ids 0..63 in counters; 0 = unclassified
QBUCKETS = 64             # QBUCKETS: queue-depth histogram buckets per port (QBUCKET_MAX = 63)
QBUCKET_MAX_SHIFT = 18    # set_port_cfg's bucket_shift is bit<5>; depths are bit<19>
QUEUE_DATA = 0            # QUEUE_DATA: bulk data, its depth is what ECN and the histogram see
QUEUE_SMALL = 1           # QUEUE_SMALL: small packets (pure ACKs, pings, ARP replies), served first
PRIORITY_QUEUES = 2       # simple_switch_grpc --priority-queues: the programs use two
SMALL_PACKET_MAX_IP_BYTES = 128  # SMALL_PKT_MAX_LEN: IPv4 total length of a "small" packet
SMALL_FRAME_BYTES = SMALL_PACKET_MAX_IP_BYTES + ETHERNET_HEADER_BYTES
QDEPTH_BITS = 19          # standard_metadata.enq_qdepth and the ecn_threshold are bit<19>
NO_MARKING = (1 << QDEPTH_BITS) - 1  # the initial ecn_threshold 0x7FFFF: never mark
ECMP_MEMBERS = 1024       # ECMP_MEMBERS: ecmp_members entries per switch (all groups together)
# ecmp_group's crc32 input, in order: (field, bits); mn_harness/p4/ecmp.py packs exactly this
ECMP_HASH_INPUTS = (("hdr.ipv4.srcAddr", 32), ("hdr.ipv4.dstAddr", 32), ("hdr.ipv4.protocol", 8),
                    ("meta.l4_src", 16), ("meta.l4_dst", 16), ("seed", 32))

# -- aggregation.p4 ------------------------------------------------------------------------------
AGG_VECLEN = 64           # AGG_VECLEN: int32 values per aggregation packet
AGG_POOL = 2048           # AGG_POOL: physical aggregation slots shared by all jobs of a switch
AGG_STATS_KINDS = 8       # AGG_STATS_KINDS: agg_stats cells per job
AGG_PORT_BASE = 0xBE00    # AGG_PORT_BASE: UDP destination port of job j is AGG_PORT_BASE + j
AGG_PORT_MASK = 0xFFC0    # AGG_PORT_MASK: the parser matches AGG_PORTS ports from the base
AGG_PORTS = (~AGG_PORT_MASK & 0xFFFF) + 1
AGG_MAX_WORKERS = 32      # the worker bitmap register is bit<32>: one bit per rank
AGG_MAX_JOB_ID = MAX_JOBS - 1  # aggregation job ids 1..63 (agg_job table, agg_stats index)
AGG_FLAG_RESULT = 1       # AGG_FLAG_RESULT
AGG_FLAG_SATURATED = 2    # AGG_FLAG_SATURATED
INC_MAX_SLOTS = AGG_POOL // 2  # window slots one job may ask for (2 physical slots each)
