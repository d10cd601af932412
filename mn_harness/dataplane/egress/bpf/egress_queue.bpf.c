// SPDX-License-Identifier: GPL-2.0
/*
 * egress_queue: the Linux data plane's tc clsact egress program (ECN marking + queue counters).
 *
 * It runs on a router port's egress (clsact, direct action) for every packet just before the
 * packet is handed to the port's root qdisc (HTB at the link rate with a byte FIFO as its leaf,
 * mn_harness/network/shaping.py), so the depth it sees is the depth the packet joins: the
 * "enq_qdepth" of the BMv2 program (mn_harness/p4/programs/ecn_telemetry.p4).
 *
 * Where the depth comes from (MNH_TRACK, chosen by measurement: docs/p4.md "ECN on the Linux
 * data plane"):
 *   MNH_TRACK_BACKLOG  the qdisc's own backlog, read through bpf_cast_to_kern_ctx():
 *                      skb->dev->qdisc->qstats.backlog, in the bytes the FIFO counts
 *                      (qdisc_pkt_len, i.e. GSO segments with their headers). Exact; needs a
 *                      kernel with that kfunc (6.2+) and BTF.
 *   MNH_TRACK_VQ       a virtual queue drained at the link rate with HTB's burst as credit
 *                      (for kernels without the kfunc). An estimate: it does not see HTB's
 *                      timer granularity or the port pausing.
 * MNH_COMPARE=1 (backlog builds only) also runs the virtual queue and records both, for the
 * tracking benchmark.
 *
 * Per packet: the depth before it is queued; a predicted drop when depth + its length exceeds
 * the FIFO's limit (the FIFO itself drops it: this program only counts); otherwise, if it is
 * ECT(0)/ECT(1) and depth >= MNH_MARK_BYTES, it leaves as CE (IPv4 checksum fixed, IPv6 has
 * none). Not-ECT packets are never changed. Counters are per CPU and cumulative (the harness
 * reads them ~100 times/s and takes differences); the interval maximum uses an epoch the
 * harness advances at each read (mnh_ctl), two slots so the closing interval's maximum stays
 * readable while the next one starts.
 *
 * Compile-time parameters (-D, mn_harness/dataplane/egress/build.py):
 *   MNH_MARK_BYTES, MNH_LIMIT_BYTES, MNH_TRACK, MNH_COMPARE, MNH_VQ_RATE_FP (link rate in
 *   bytes/ns << 20), MNH_VQ_BURST_BYTES, MNH_JOBS (job ids 0..MNH_JOBS-1; 0 = no job).
 * The layout of struct mnh_counters is mirrored in mn_harness/dataplane/egress/counters.py
 * (COUNTER_FIELDS); tests/dataplane/egress/test_counters.py parses this file to keep them in step.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MNH_TRACK_BACKLOG 1
#define MNH_TRACK_VQ 2

#ifndef MNH_MARK_BYTES
#define MNH_MARK_BYTES 0
#endif
#ifndef MNH_LIMIT_BYTES
#define MNH_LIMIT_BYTES 0xffffffffULL
#endif
#ifndef MNH_TRACK
#define MNH_TRACK MNH_TRACK_BACKLOG
#endif
#ifndef MNH_COMPARE
#define MNH_COMPARE 0
#endif
#ifndef MNH_VQ_RATE_FP
#define MNH_VQ_RATE_FP 131072ULL	/* 1 Gbit/s = 0.125 bytes/ns, << 20 */
#endif
#ifndef MNH_VQ_BURST_BYTES
#define MNH_VQ_BURST_BYTES 125000
#endif
#ifndef MNH_JOBS
#define MNH_JOBS 1
#endif

#define MNH_USE_VQ (MNH_TRACK == MNH_TRACK_VQ || MNH_COMPARE)
#define MNH_MAX_ELAPSED_NS 1000000000ULL	/* keeps elapsed * rate in 64 bits */

#define TC_ACT_OK 0
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ECN_MASK 3
#define ECN_CE 3

char _license[] SEC("license") = "GPL";

#if MNH_TRACK == MNH_TRACK_BACKLOG
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
#endif

struct mnh_counters {
	__u64 frames;		/* frames (GSO segments) accepted into the queue */
	__u64 byte_count;	/* their bytes as the FIFO counts them */
	__u64 depth_sum;	/* sum over accepted frames of the depth (bytes) each joined */
	__u64 marks;		/* frames this program marked CE */
	__u64 drop_frames;	/* frames that found the FIFO full (it drops them) */
	__u64 drop_packets;	/* the same in packets (a GSO packet is one) */
	__u64 ect_frames;	/* accepted ECT(0)/ECT(1) frames, marked or not */
	__u64 not_ect_frames;	/* accepted not-ECT frames (never marked) */
	__u64 ce_frames;	/* accepted frames already CE on arrival */
	__u64 max_epoch[2];
	__u64 max_depth[2];	/* largest depth (bytes) seen in epoch max_epoch[i] */
	__u64 last_ns;		/* bpf_ktime_get_ns() of the last packet on this CPU */
	__u64 last_depth;	/* tracked depth (bytes) right after that packet was queued */
	__u64 last_backlog;	/* the same from the qdisc's backlog (backlog builds) */
	__u64 last_vq;		/* the same from the virtual queue (vq builds, MNH_COMPARE) */
	__u64 job_bytes[MNH_JOBS];
	__u64 job_marks[MNH_JOBS];
};

struct mnh_ctl {
	__u64 epoch;
};

struct mnh_vq {
	struct bpf_spin_lock lock;
	__u64 t_ns;
	__s64 level;		/* bytes queued; negative: HTB's unused burst credit */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mnh_counters);
} mnh_cnt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mnh_ctl);
} mnh_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);	/* IPv4 address as on the wire */
	__type(value, __u32);	/* job id */
} mnh_jobs SEC(".maps");

#if MNH_USE_VQ
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mnh_vq);
} mnh_vq SEC(".maps");
#endif

/* The virtual queue's depth before a packet of `len` bytes arrives at `now`; adds the packet
 * unless it would overflow the FIFO. */
static __always_inline __u64 vq_depth(__u64 now, __u32 len)
{
#if MNH_USE_VQ
	__u32 zero = 0;
	struct mnh_vq *v = bpf_map_lookup_elem(&mnh_vq, &zero);
	__u64 elapsed, depth;
	__s64 level;

	if (!v)
		return 0;
	bpf_spin_lock(&v->lock);
	elapsed = now > v->t_ns ? now - v->t_ns : 0;
	if (elapsed > MNH_MAX_ELAPSED_NS)
		elapsed = MNH_MAX_ELAPSED_NS;
	v->t_ns = now;
	level = v->level - (__s64)((elapsed * MNH_VQ_RATE_FP) >> 20);
	if (level < -(__s64)MNH_VQ_BURST_BYTES)
		level = -(__s64)MNH_VQ_BURST_BYTES;
	depth = level > 0 ? (__u64)level : 0;
	if (depth + len <= MNH_LIMIT_BYTES)
		level += len;
	v->level = level;
	bpf_spin_unlock(&v->lock);
	return depth;
#else
	return 0;
#endif
}

/* Bytes the qdisc will count for this packet when the kernel context is not available: every
 * GSO segment carries its own headers (qdisc_pkt_len_init), estimated from the segment size. */
static __always_inline __u32 estimated_pkt_len(struct __sk_buff *ctx, __u32 segs)
{
	__u32 len = ctx->len;
	__u32 hdr;

	if (segs <= 1 || !ctx->gso_size || len <= segs * ctx->gso_size)
		return len;
	hdr = len - segs * ctx->gso_size;
	return len + (segs - 1) * hdr;
}

/* A queue of `depth` bytes after a packet of `len` bytes arrived: the FIFO takes it if it fits. */
static __always_inline __u64 after(__u64 depth, __u32 len)
{
	return depth + len <= MNH_LIMIT_BYTES ? depth + len : depth;
}

static __always_inline __u32 job_of(__u32 saddr, __u32 daddr)
{
	__u32 *job = bpf_map_lookup_elem(&mnh_jobs, &saddr);

	if (!job)
		job = bpf_map_lookup_elem(&mnh_jobs, &daddr);
	return job && *job < MNH_JOBS ? *job : 0;
}

/* Set CE on an ECT IPv4 packet: the TOS byte and the header checksum (RFC 1624 update). */
static __always_inline int mark_ipv4(struct __sk_buff *ctx, __u8 tos)
{
	__u16 old_word, new_word;
	__u8 new_tos = tos | ECN_CE;

	if (bpf_skb_load_bytes(ctx, ETH_HLEN, &old_word, 2))
		return 0;
	new_word = old_word;
	((__u8 *)&new_word)[1] = new_tos;
	if (bpf_skb_store_bytes(ctx, ETH_HLEN + 1, &new_tos, 1, 0))
		return 0;
	return bpf_l3_csum_replace(ctx, ETH_HLEN + offsetof(struct iphdr, check), old_word,
				   new_word, 2) == 0;
}

static __always_inline int mark_ipv6(struct __sk_buff *ctx, __u8 byte1)
{
	__u8 marked = byte1 | (ECN_CE << 4);

	return bpf_skb_store_bytes(ctx, ETH_HLEN + 1, &marked, 1, 0) == 0;
}

SEC("tc")
int mnh_egress(struct __sk_buff *ctx)
{
	__u32 zero = 0;
	struct mnh_counters *c = bpf_map_lookup_elem(&mnh_cnt, &zero);
	struct mnh_ctl *ctl = bpf_map_lookup_elem(&mnh_ctl, &zero);
	__u32 segs = ctx->gso_segs ? ctx->gso_segs : 1;
	__u64 now = bpf_ktime_get_ns();
	__u64 depth, backlog = 0, vq = 0;
	__u32 len, job = 0, ecn = 0, slot;
	__u16 proto = bpf_ntohs(ctx->protocol);
	__u8 ip[2] = {0, 0};
	int is_ip4 = 0, is_ip6 = 0;
	__u64 epoch;

	if (!c || !ctl)
		return TC_ACT_OK;

#if MNH_TRACK == MNH_TRACK_BACKLOG
	{
		struct sk_buff *skb = bpf_cast_to_kern_ctx(ctx);
		struct qdisc_skb_cb *cb = (struct qdisc_skb_cb *)skb->cb;

		backlog = skb->dev->qdisc->qstats.backlog;
		len = cb->pkt_len;
		if (!len)
			len = estimated_pkt_len(ctx, segs);
	}
	depth = backlog;
#else
	len = estimated_pkt_len(ctx, segs);
#endif
	if (MNH_USE_VQ)
		vq = vq_depth(now, len);
#if MNH_TRACK == MNH_TRACK_VQ
	depth = vq;
#endif

	/* the queue as each tracker believes it right after this packet (tracking benchmark) */
	c->last_ns = now;
	c->last_depth = after(depth, len);
	c->last_backlog = after(backlog, len);
	c->last_vq = after(vq, len);

	if (depth + len > MNH_LIMIT_BYTES) {
		c->drop_frames += segs;
		c->drop_packets += 1;
		return TC_ACT_OK;	/* the FIFO drops it */
	}

	if (proto == ETH_P_IP) {
		struct iphdr iph;

		if (!bpf_skb_load_bytes(ctx, ETH_HLEN, &iph, sizeof(iph))) {
			is_ip4 = 1;
			ecn = iph.tos & ECN_MASK;
			ip[0] = iph.tos;
			job = job_of(iph.saddr, iph.daddr);
		}
	} else if (proto == ETH_P_IPV6) {
		if (!bpf_skb_load_bytes(ctx, ETH_HLEN, ip, 2)) {
			is_ip6 = 1;
			ecn = (ip[1] >> 4) & ECN_MASK;
		}
	}

	c->frames += segs;
	c->byte_count += len;
	c->depth_sum += depth * segs;
	if (job >= MNH_JOBS)
		job = 0;
	c->job_bytes[job] += len;

	epoch = ctl->epoch;
	slot = epoch & 1;
	if (c->max_epoch[slot] != epoch) {
		c->max_epoch[slot] = epoch;
		c->max_depth[slot] = 0;
	}
	if (depth > c->max_depth[slot])
		c->max_depth[slot] = depth;

	if (!is_ip4 && !is_ip6)
		return TC_ACT_OK;
	if (ecn == 0) {
		c->not_ect_frames += segs;
		return TC_ACT_OK;
	}
	if (ecn == ECN_CE) {
		c->ce_frames += segs;
		return TC_ACT_OK;
	}
	c->ect_frames += segs;
	if (MNH_MARK_BYTES && depth >= MNH_MARK_BYTES) {
		int done = is_ip4 ? mark_ipv4(ctx, ip[0]) : mark_ipv6(ctx, ip[1]);

		if (done) {
			c->marks += segs;
			c->job_marks[job] += segs;
		}
	}
	return TC_ACT_OK;
}
