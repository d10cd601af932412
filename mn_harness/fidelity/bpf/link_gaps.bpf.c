// SPDX-License-Identifier: GPL-2.0
/*
 * link_gaps: the link invariant of Mininet-HiFi, measured in the kernel on every shaped egress.
 *
 * A real link that has packets queued sends them back to back: the next packet starts exactly
 * one serialisation time (bytes * 8 / rate) after the previous one. An emulated link is an HTB
 * qdisc woken by a timer and a softirq; when either is late (the CPU went to someone else) the
 * gap grows, and HTB's burst credit then lets the next packets out faster than the line. So: for
 * every dequeue of a monitored root qdisc that left packets queued behind it (backlogged), the
 * gap to the next dequeue is compared with the serialisation time of what was dequeued, in the
 * bytes HTB charges (qdisc_pkt_len: a GSO packet's every segment with its headers).
 *
 * Counted per egress (key: network namespace inode + ifindex, filled in by the harness with the
 * link's rate, before the jobs start): gaps within the tolerance, late, early, their sums, and
 * a log-linear histogram of the excess (gap - serialisation time) for its percentiles. Gaps
 * after dequeues smaller than `min_bytes` (ACKs, pure control) are not counted: a few
 * microseconds of timer noise would dwarf their serialisation time.
 *
 * mnh_dequeue runs on the qdisc:qdisc_dequeue tracepoint (BTF-typed: the root qdisc, its
 * device, the skb). mnh_timeline is the same arithmetic fed from user space (BPF_PROG_TEST_RUN
 * of a syscall program, one call per hand-built event), so the tests check this code, not a
 * copy of it. struct mnh_link and the histogram layout are mirrored in
 * mn_harness/fidelity/link.py (a test parses this file to keep them in step).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

#define MNH_FP_SHIFT 16			/* ns_per_byte_fp: nanoseconds per byte << 16 */
#define MNH_HIST_SUB_BITS 3		/* 8 buckets per power of two: <= 12.5% wide */
#define MNH_HIST_BUCKETS 320		/* bucket 0: no excess; the last one holds everything above */
#define MNH_MAX_BULK 8			/* skbs of one bulk dequeue summed (veth dequeues one) */
#define MNH_SIZE_CLASSES 17		/* gaps by the frames (of min_bytes) before them: 1..15, 16+ */

struct mnh_link_key {
	__u32 netns;			/* inode of the egress's network namespace */
	__u32 ifindex;
};

struct mnh_link {
	/* set by the harness */
	__u64 ns_per_byte_fp;		/* serialisation time of one byte at the link rate, << 16 */
	__u64 min_bytes;		/* smaller dequeues start no counted gap */
	__u64 tol_permille;		/* within: |gap - ideal| * 1000 <= ideal * tol_permille */
	/* the last dequeue */
	__u64 last_ns;
	__u64 last_ideal_ns;		/* its serialisation time; 0: the gap after it is not counted */
	__u64 last_class;		/* its size class */
	/* counters since the entry was written */
	__u64 dequeues;
	__u64 bytes;
	__u64 gaps;			/* counted gaps (backlogged, after a large enough dequeue) */
	__u64 within;
	__u64 late;			/* gap > ideal beyond the tolerance */
	__u64 early;			/* gap < ideal beyond the tolerance: a burst */
	__u64 gap_ns;			/* sum of counted gaps */
	__u64 ideal_ns;			/* sum of their serialisation times */
	__u64 excess_hist[MNH_HIST_BUCKETS];
	__u64 size_gaps[MNH_SIZE_CLASSES];	/* counted gaps by the size of the dequeue before them */
	__u64 size_within[MNH_SIZE_CLASSES];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mnh_link_key);
	__type(value, struct mnh_link);
} mnh_links SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* Bucket of an excess of `ns` nanoseconds: 0 for none, then log-linear (8 per octave). */
static __always_inline __u32 excess_bucket(__u64 ns)
{
	__u32 octave, idx;

	if (ns == 0)
		return 0;
	if (ns < (1 << MNH_HIST_SUB_BITS))
		return (__u32)ns;
	octave = log2_u64(ns);
	idx = ((octave - MNH_HIST_SUB_BITS + 1) << MNH_HIST_SUB_BITS)
	      + (__u32)((ns >> (octave - MNH_HIST_SUB_BITS)) & ((1 << MNH_HIST_SUB_BITS) - 1));
	return idx < MNH_HIST_BUCKETS ? idx : MNH_HIST_BUCKETS - 1;
}

/* One dequeue of `bytes` at `now` that left `queued` packets behind it. */
static __always_inline void on_dequeue(struct mnh_link *l, __u64 now, __u64 bytes, __u64 queued)
{
	__u64 ideal = l->last_ideal_ns;

	if (ideal && now >= l->last_ns) {
		__u64 gap = now - l->last_ns;
		__u64 off = gap > ideal ? gap - ideal : ideal - gap;
		__u32 b, c = l->last_class < MNH_SIZE_CLASSES ? l->last_class : MNH_SIZE_CLASSES - 1;

		l->gaps++;
		l->gap_ns += gap;
		l->ideal_ns += ideal;
		l->size_gaps[c]++;
		if (off * 1000 <= ideal * l->tol_permille) {
			l->within++;
			l->size_within[c]++;
		} else if (gap > ideal)
			l->late++;
		else
			l->early++;
		b = excess_bucket(gap > ideal ? gap - ideal : 0);
		if (b < MNH_HIST_BUCKETS)
			l->excess_hist[b]++;
	}
	l->dequeues++;
	l->bytes += bytes;
	l->last_ns = now;
	l->last_ideal_ns = queued && bytes >= l->min_bytes && l->min_bytes
			   ? (bytes * l->ns_per_byte_fp) >> MNH_FP_SHIFT : 0;
	l->last_class = l->min_bytes ? bytes / l->min_bytes : 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(mnh_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets,
	     struct sk_buff *skb)
{
	struct mnh_link_key key = {};
	struct net_device *dev;
	struct mnh_link *l;
	struct sk_buff *s = skb;
	__u64 bytes = 0;
	int i;

	if (!skb || !q)
		return 0;
	dev = BPF_CORE_READ(q, dev_queue, dev);
	if (!dev)
		return 0;
	key.ifindex = BPF_CORE_READ(dev, ifindex);
	key.netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	l = bpf_map_lookup_elem(&mnh_links, &key);
	if (!l)
		return 0;
	for (i = 0; i < MNH_MAX_BULK && s; i++) {
		__u32 len = 0;

		/* qdisc_pkt_len(): the first field of struct qdisc_skb_cb, at the start of skb->cb */
		bpf_probe_read_kernel(&len, sizeof(len), (void *)s + bpf_core_field_offset(struct sk_buff, cb));
		bytes += len ? len : BPF_CORE_READ(s, len);
		if (i + 1 >= packets)
			break;
		s = BPF_CORE_READ(s, next);
	}
	on_dequeue(l, bpf_ktime_get_ns(), bytes, BPF_CORE_READ(q, q.qlen));
	return 0;
}

/* The same arithmetic on a hand-built event (tests): ctx is struct mnh_timeline_event. */
struct mnh_timeline_event {
	struct mnh_link_key key;
	__u64 now_ns;
	__u64 bytes;
	__u64 queued;
};

SEC("syscall")
int mnh_timeline(struct mnh_timeline_event *ev)
{
	struct mnh_link_key key = ev->key;
	struct mnh_link *l = bpf_map_lookup_elem(&mnh_links, &key);

	if (!l)
		return 1;
	on_dequeue(l, ev->now_ns, ev->bytes, ev->queued);
	return 0;
}
