/* ecn_headers.p4 -- part of ecn_telemetry.p4, shared with aggregation.p4 (textual include: the
 * P4Info names stay those of the including program). Constants, types and headers.
 * The constants Python needs too are mirrored in mn_harness/p4/limits.py, and
 * tests/p4/test_limits.py fails when the two disagree. */
#define MAX_PORTS 32
#define PORT_MASK 31
#define MAX_JOBS 64
#define QBUCKETS 64
#define QBUCKET_MAX 63
#define ECMP_MEMBERS 1024

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;
const bit<16> ARP_REQUEST = 1;
const bit<16> ARP_REPLY   = 2;
const bit<2>  ECN_NOT_ECT = 0;
const bit<2>  ECN_CE      = 3;

/* Egress queues: the switch runs with `--priority-queues 2`; BMv2 serves the highest priority
 * first, each priority queue with its own depth and packets/s rate (set per port over Thrift).
 * Small packets (IPv4 total length <= SMALL_PKT_MAX_LEN: pure TCP ACKs, pings, ARP replies) go
 * to QUEUE_SMALL, everything else to QUEUE_DATA, whose depth is what ECN marking and qdepth_hist
 * look at. */
const bit<3>  QUEUE_DATA  = 0;
const bit<3>  QUEUE_SMALL = 1;
const bit<16> SMALL_PKT_MAX_LEN = 128;

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t {
    mac_t   dstAddr;
    mac_t   srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    mac_t   sha;
    ip4_t   spa;
    mac_t   tha;
    ip4_t   tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    ip4_t   srcAddr;
    ip4_t   dstAddr;
}

/* First 4 bytes of TCP and UDP: the ports. Only parsed when the IPv4 header has no options. */
header l4_ports_t {
    bit<16> srcPort;
    bit<16> dstPort;
}
