/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared code of the mn-harness BPF congestion controls.
 *
 * Why one header to include: every variant (mltcp_reno, mltcp_cubic, dctcp, mltcp_dctcp)
 * needs the same four things on top of its base algorithm:
 *   1. in-kernel iteration tracking: a CA_EVENT_TX_START after the socket had nothing in
 *      flight for longer than MLTCP_IDLE_GAP_NS starts a new training iteration, once at
 *      least MLTCP_MIN_ITER_FRAC_FP/1024 of the learned bytes per iteration were sent (here);
 *   2. the MLTCP factor F(bytes_ratio) = slope * bytes_ratio + intercept, in fixed point
 *      (BPF has no floats), used to scale the congestion-avoidance increase (mltcp_factor.h);
 *   3. with MLTCP_ADAPT, the step that adapts: the socket searches (slope, restart) while
 *      that makes its iterations faster, else runs past the search (mltcp_adapt.h);
 *   4. telemetry: one row per (socket, iteration) in an LRU hash map the harness dumps (here).
 * The kernel's TCP helpers and the guard against lost callbacks are in mltcp_tcp.h. The parts
 * are included from here, each where what it uses is defined, and are not meant on their own.
 *
 * Parameters are compile-time constants (-D...), see mn_harness/cc/build.py for why.
 * The struct mltcp_state must be the FIRST member of every variant's private area so
 * this code can find it at the start of icsk_ca_priv.
 */
#ifndef MLTCP_COMMON_H
#define MLTCP_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#if !defined(MLTCP_NAME) || !defined(MLTCP_TELEM)
#error "build with -DMLTCP_NAME=<kernel cc name> -DMLTCP_TELEM=<telemetry map name>"
#endif
#ifndef MLTCP_SCALE          /* 0: F is always 1 (plain base algorithm + telemetry) */
#define MLTCP_SCALE 1
#endif
#ifndef MLTCP_SLOPE_FP       /* slope * 1024 */
#define MLTCP_SLOPE_FP 1024
#endif
#ifndef MLTCP_INTERCEPT_FP   /* intercept * 1024 */
#define MLTCP_INTERCEPT_FP 1024
#endif
#ifndef MLTCP_IDLE_GAP_NS
#define MLTCP_IDLE_GAP_NS 10000000ULL
#endif

#ifndef MLTCP_RESTART        /* 1: every new iteration restarts from the initial window */
#define MLTCP_RESTART 0
#endif
#define MLTCP_RESTART_CWND 10U  /* TCP_INIT_CWND */

#ifndef MLTCP_MIN_ITER_FRAC_FP  /* x1024: bytes an iteration must have sent before a pause ends it */
#define MLTCP_MIN_ITER_FRAC_FP 768
#endif

#ifndef MLTCP_ADAPT          /* 1: the search (slope, restart) ends when it stops paying */
#define MLTCP_ADAPT 0
#endif
#ifndef MLTCP_ADAPT_GAIN_FP  /* x1024: an iteration this much faster than the best is progress */
#define MLTCP_ADAPT_GAIN_FP 128
#endif
#ifndef MLTCP_ADAPT_PATIENCE /* iterations without progress after which the search ends */
#define MLTCP_ADAPT_PATIENCE 8
#endif
#ifndef MLTCP_ADAPT_DROP_FP  /* x1024: an iteration this much slower than the usual one collided */
#define MLTCP_ADAPT_DROP_FP 256
#endif
#define MLTCP_ADAPT_RELAPSE 2	/* collided iterations in a row that start a new search */
#ifndef MLTCP_ADAPT_BACKOFF_MAX /* the most collided iterations in a row a new search can need */
#define MLTCP_ADAPT_BACKOFF_MAX 64
#endif
#ifndef MLTCP_DAMP           /* searching: each loss episode divides F - 1 by 2^MLTCP_DAMP (0: off) */
#define MLTCP_DAMP 0
#endif
#ifndef MLTCP_DAMP_AFTER     /* searching: damp only once count (iterations without progress) >= this */
#define MLTCP_DAMP_AFTER 0
#endif
#ifndef MLTCP_CALM_BY        /* the first search ends at this iteration if its losses never fell (0: off) */
#define MLTCP_CALM_BY 0
#endif
#ifndef MLTCP_HOLD_SLOPE_FP  /* x1024: F's slope once a search ended (0: F = 1, the base CC) */
#define MLTCP_HOLD_SLOPE_FP 0
#endif
#define MLTCP_CALM_SHIFT 3	/* calm: an iteration's loss episodes at most the peak's 1/2^this */
#define MLTCP_LOSSES_MAX 255	/* the loss-episode count saturates here (8 bits of mltcp_state) */
#define MLTCP_DAMP_SHIFT_MAX 31	/* F - 1 < 2^16 (F <= 64): any shift past 16 leaves 0 */

#define MLTCP_STR2(x) #x
#define MLTCP_STR(x) MLTCP_STR2(x)

#define MLTCP_FP_SHIFT 10
#define MLTCP_FP_ONE (1U << MLTCP_FP_SHIFT)

/* ecn_flags bits (include/net/tcp.h; AccECN-era layout, RFC3168 bit unchanged since 2.6) */
#define MLTCP_ECN_MODE_RFC3168 0x1
#define MLTCP_ECN_DEMAND_CWR 0x4
#define MLTCP_ECN_MODE_ACCECN 0x10
#define MLTCP_ECN_MODE_ANY (MLTCP_ECN_MODE_RFC3168 | MLTCP_ECN_MODE_ACCECN)
/* tcp_congestion_ops.flags bit: negotiate ECN on the handshake (include/net/tcp.h) */
#define MLTCP_CONG_NEEDS_ECN 0x2

#ifndef min
#define min(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) ((a) > (b) ? (a) : (b))
#endif

char _license[] SEC("license") = "GPL";

#include "mltcp_tcp.h"

/* mltcp_state.flags */
#define MLTCP_F_LAST_BIG 0x1	/* the last iteration was over 1.5x the estimate (not learned) */
#define MLTCP_F_BASE 0x2	/* adaptive: not searching: no restart, F = 1 (the base CC) or the held slope's */
#define MLTCP_F_BACKOFF_SHIFT 2	/* adaptive, bits 2-4: searches started by a relapse so far; */
#define MLTCP_F_BACKOFF 0x1c	/* the next needs MLTCP_ADAPT_RELAPSE << that many slow iterations */
#define MLTCP_F_RTO 0x20	/* the current iteration had a retransmission timeout */
#define MLTCP_F_CALM 0x40	/* adaptive: the first search had two calm iterations in a row (MLTCP_CALM_BY) */
#define MLTCP_F_CALM_LAST 0x80	/* adaptive: the first search's last iteration was calm */

/*
 * Per-socket MLTCP state, first member of each variant's icsk_ca_priv struct (40 bytes: CUBIC's
 * own 60 leave no more of the 104).
 */
struct mltcp_state {
	__u64 iter_start_acked;	/* tp->bytes_acked when the current iteration began */
	__u64 iter_start_ns;	/* bpf_ktime_get_ns() at that TX_START */
	__u32 learned;		/* learned bytes per iteration, 0 = not learned yet */
	__u32 iter : 24;	/* current iteration number, 0 = no data sent yet (wraps after 2^24) */
	__u32 losses : 8;	/* loss episodes (fast recovery, timeouts) in the current iteration,
				 * saturating at MLTCP_LOSSES_MAX: the room for it, as CUBIC's
				 * private state leaves none beside these 40 bytes; 25 MB
				 * iterations on an overloaded link see more than 15 */
	__u32 rate_ref;		/* adaptive, bytes per us x1024: searching, the best iteration's rate;
				 * not searching, the usual one's (a moving average; 0: not yet) */
	__u32 last_ack_us;	/* last time an ACK acknowledged new data, in us after iter_start_ns
				 * (saturating: 71 minutes; 32 bits, so that loss_peak fits) */
	__u16 sport;		/* local port, saved because it reads 0 in release() */
	__u8 flags;		/* MLTCP_F_* */
	__u8 count;		/* adaptive: searching, iterations since the last progress; not
				 * searching, collided iterations in a row */
	__u8 loss_peak;		/* adaptive: the most loss episodes of an iteration of the first search */
	__u8 spare[3];
};

/* Telemetry: one row per socket and finished iteration (the last one is written at close). */
struct mltcp_key {
	__u32 saddr;		/* network byte order, as in the socket */
	__u32 daddr;
	__u16 sport;		/* host byte order */
	__u16 dport;
	__u32 iter;
};

struct mltcp_row {
	__u64 bytes;		/* bytes acked during this iteration (+1 for a FIN in the last) */
	__u64 believed;		/* bytes-per-iteration estimate used for F during it (0: F=1) */
	__u64 learned;		/* estimate after this iteration */
	__u64 start_ns;		/* CLOCK_MONOTONIC */
	__u64 end_ns;		/* last ACK of the iteration */
	__u32 f_last_fp;	/* F (x1024) at the last ACK of the iteration */
	__u32 final;		/* 1: written when the socket closed (iteration may be partial) */
	__u32 slope_fp;		/* the slope (x1024) in effect during the iteration (0: base CC) */
	__u32 rto;		/* 1: the iteration had a retransmission timeout (TCP_CA_Loss) */
	__u32 losses;		/* loss episodes in the iteration (set_state: Recovery or Loss) */
	__u32 count;		/* adaptive: mltcp_state.count during the iteration (searching:
				 * iterations since the last progress; as the base CC: collided
				 * iterations in a row) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct mltcp_key);
	__type(value, struct mltcp_row);
} MLTCP_TELEM SEC(".maps");

static __always_inline struct mltcp_state *mltcp_st(const struct sock *sk)
{
	return (struct mltcp_state *)inet_csk_ca(sk);
}

static __always_inline void mltcp_init(struct sock *sk)
{
	struct mltcp_state *st = mltcp_st(sk);

	st->iter_start_acked = 0;
	st->iter_start_ns = 0;
	st->last_ack_us = 0;
	st->learned = 0;
	st->iter = 0;
	st->losses = 0;
	st->rate_ref = 0;
	st->sport = 0;
	st->flags = 0;
	st->count = 0;
	st->loss_peak = 0;
}

/* The last ACK's time (bpf_ktime_get_ns), or the iteration's start if none came yet. */
static __always_inline __u64 mltcp_last_ack_ns(const struct mltcp_state *st)
{
	return st->iter_start_ns + (__u64)st->last_ack_us * 1000;
}

#include "mltcp_factor.h"

static __always_inline void mltcp_write_row(struct sock *sk, struct mltcp_state *st,
					    __u64 bytes, __u64 believed, __u32 f_fp, __u32 final)
{
	struct mltcp_key key = {};
	struct mltcp_row row = {};

	key.saddr = sk->__sk_common.skc_rcv_saddr;
	key.daddr = sk->__sk_common.skc_daddr;
	key.sport = (__u16)st->sport;
	key.dport = bpf_ntohs(sk->__sk_common.skc_dport);
	key.iter = st->iter;
	row.bytes = bytes;
	row.believed = believed;
	row.learned = st->learned;
	row.start_ns = st->iter_start_ns;
	row.end_ns = mltcp_last_ack_ns(st);
	row.f_last_fp = f_fp;
	row.final = final;
	row.slope_fp = (__u32)mltcp_slope_fp(st);
	row.rto = (st->flags & MLTCP_F_RTO) ? 1 : 0;
	row.losses = st->losses;
	row.count = st->count;
	bpf_map_update_elem(&MLTCP_TELEM, &key, &row, BPF_ANY);
}

/*
 * What Linux's tcp_cwnd_restart() does after an idle of many RTOs (slow start after idle),
 * done at an iteration boundary instead: ssthresh keeps 3/4 of the window
 * (tcp_current_ssthresh) and the window restarts from the initial one. Without it (slow start
 * after idle off, as training clusters run) a phase starts with the window its last phase
 * ended with and takes a full share of the link from a job that is finishing, which MLTCP's
 * scaled increase then needs tens of round trips to undo (docs/cc.md#restart).
 */
static __always_inline void mltcp_restart_window(struct tcp_sock *tp)
{
	__u32 cwnd = tp->snd_cwnd;

	if (cwnd <= MLTCP_RESTART_CWND)
		return;
	tp->snd_ssthresh = max(tp->snd_ssthresh, (cwnd >> 1) + (cwnd >> 2));
	tp->snd_cwnd = MLTCP_RESTART_CWND;
}

#include "mltcp_adapt.h"

/* Called from each variant's cwnd_event for CA_EVENT_TX_START. */
static __always_inline void mltcp_tx_start(struct sock *sk)
{
	struct mltcp_state *st = mltcp_st(sk);
	__u64 now = bpf_ktime_get_ns();
	__u64 acked = tcp_sk(sk)->bytes_acked;
	__u64 bytes, believed;
	__u32 f_fp;
	bool big;

	if (st->iter == 0) {
		st->sport = sk->__sk_common.skc_num;
		st->iter = 1;
		st->iter_start_acked = acked;
		st->iter_start_ns = now;
		return;
	}
	if (now - mltcp_last_ack_ns(st) <= MLTCP_IDLE_GAP_NS)
		return;		/* short pause inside an iteration (e.g. between ring steps) */
	bytes = acked - st->iter_start_acked;
	if (!bytes)
		return;
	/*
	 * A pause longer than the gap before most of an iteration's bytes were sent is a stall
	 * inside the communication phase (a ring step waiting for a neighbour whose flow sat in
	 * a retransmission timeout: seen with three jobs on one link), not a compute phase:
	 * ending the iteration there would restart F at its intercept halfway through.
	 */
	if (st->learned && (bytes << MLTCP_FP_SHIFT) < (__u64)st->learned * MLTCP_MIN_ITER_FRAC_FP)
		return;
	believed = st->learned;
	f_fp = mltcp_factor(sk);
	/*
	 * Learn from the iteration that just ended: first one as is, then average 1:1 -- except
	 * a single one over 1.5x the estimate: a boundary was missed (a compute pause shorter
	 * than the gap, or a TX_START callback lost, see the guard above), so two iterations
	 * counted as one. Averaged in, it would raise the estimate until the next real
	 * iteration fell under MLTCP_MIN_ITER_FRAC_FP of it, and every iteration after would
	 * be merged with the next (seen in 2 of 10 three-job runs). Two in a row over 1.5x are
	 * a real change (or a first iteration that was split) and are learned.
	 */
	big = st->learned && bytes * 2 > (__u64)st->learned * 3;
	if (!st->learned)
		st->learned = bytes > 0xffffffffULL ? 0xffffffffU : (__u32)bytes;
	else if (!big || (st->flags & MLTCP_F_LAST_BIG))
		st->learned = (__u32)min(((__u64)st->learned + bytes) / 2, 0xffffffffULL);
	st->flags = big ? st->flags | MLTCP_F_LAST_BIG : st->flags & ~MLTCP_F_LAST_BIG;
	mltcp_write_row(sk, st, bytes, believed, f_fp, 0);
	mltcp_adapt(st, bytes, st->last_ack_us, st->flags & MLTCP_F_RTO);
	st->flags &= ~MLTCP_F_RTO;
	st->losses = 0;
	st->iter++;
	st->iter_start_acked = acked;
	st->iter_start_ns = now;
	st->last_ack_us = 0;
#if MLTCP_RESTART
	if (!(st->flags & MLTCP_F_BASE))
		mltcp_restart_window(tcp_sk(sk));
#endif
}

/*
 * Called from each variant's set_state: TCP_CA_Loss is a retransmission timeout
 * (tcp_enter_loss; set_state sees it also where CA_EVENT_LOSS is not sent, a timeout during
 * fast recovery). A loss episode is fast recovery (TCP_CA_Recovery) or a timeout (each
 * TCP_CA_Loss, also a timeout repeated before the first was repaired); ECN's window reduction
 * (TCP_CA_CWR, DCTCP's answer to marks) is none. Counted in every iteration, searching or not
 * (telemetry); only a search's F is damped by them (mltcp_factor).
 */
static __always_inline void mltcp_set_state(struct sock *sk, __u8 new_state)
{
	struct mltcp_state *st = mltcp_st(sk);

	if (new_state == TCP_CA_Loss)
		st->flags |= MLTCP_F_RTO;
	if ((new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss) && st->losses < MLTCP_LOSSES_MAX)
		st->losses++;
}

/* Called from each variant's pkts_acked: remembers when data was last acknowledged. */
static __always_inline void mltcp_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct mltcp_state *st = mltcp_st(sk);
	__u64 us;

	if (!sample->pkts_acked || !st->iter)
		return;
	us = (bpf_ktime_get_ns() - st->iter_start_ns) / 1000;
	st->last_ack_us = us > 0xffffffffULL ? 0xffffffffU : (__u32)us;
}

/* Called from each variant's release: records the iteration that was running at close. */
static __always_inline void mltcp_release(struct sock *sk)
{
	struct mltcp_state *st = mltcp_st(sk);
	__u64 bytes;

	if (!st->iter)
		return;
	bytes = tcp_sk(sk)->bytes_acked - st->iter_start_acked;
	if (bytes)
		mltcp_write_row(sk, st, bytes, st->learned, mltcp_factor(sk), 1);
}

_Static_assert(sizeof(struct mltcp_state) == 40, "mltcp_state grew: CUBIC's private state needs its 64 bytes");
_Static_assert(MLTCP_DAMP >= 0 && MLTCP_DAMP <= 8, "MLTCP_DAMP outside 0..8");
_Static_assert(MLTCP_CALM_BY >= 0 && MLTCP_CALM_BY <= 255, "MLTCP_CALM_BY outside 0..255");
_Static_assert(MLTCP_HOLD_SLOPE_FP >= 0 && MLTCP_HOLD_SLOPE_FP <= (64 << MLTCP_FP_SHIFT),
	       "MLTCP_HOLD_SLOPE_FP outside 0..64 x1024");
_Static_assert(MLTCP_DAMP_AFTER >= 0 && MLTCP_DAMP_AFTER <= MLTCP_ADAPT_PATIENCE,
	       "MLTCP_DAMP_AFTER outside 0..MLTCP_ADAPT_PATIENCE");

#define MLTCP_ASSERT_FITS(type) \
	_Static_assert(sizeof(type) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv), \
		       #type " does not fit in icsk_ca_priv")

#endif /* MLTCP_COMMON_H */
