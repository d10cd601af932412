/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared code of the mn-harness BPF congestion controls.
 *
 * Why one header: every variant (mltcp_reno, mltcp_cubic, dctcp, mltcp_dctcp) needs the
 * same three things on top of its base algorithm:
 *   1. in-kernel iteration tracking: a CA_EVENT_TX_START after the socket had nothing in
 *      flight for longer than MLTCP_IDLE_GAP_NS starts a new training iteration, once at
 *      least MLTCP_MIN_ITER_FRAC_FP/1024 of the learned bytes per iteration were sent;
 *   2. the MLTCP factor F(bytes_ratio) = slope * bytes_ratio + intercept, in fixed point
 *      (BPF has no floats), used to scale the congestion-avoidance increase;
 *   3. with MLTCP_ADAPT, the step that adapts: the socket searches (slope, restart) while
 *      that makes its iterations faster, else runs as its base CC (mltcp_adapt below);
 *   4. telemetry: one row per (socket, iteration) in an LRU hash map the harness dumps.
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

/* Kernel TCP helpers exported to BPF congestion controls as kfuncs. */
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

static __always_inline bool tcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* Same test as the kernel's tcp_is_cwnd_limited() (static inline there, so re-done here). */
static __always_inline bool tcp_is_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (tp->is_cwnd_limited)
		return true;
	/* In slow start, let cwnd grow to twice what was in flight. */
	if (tcp_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

/*
 * Guard against lost callbacks. On this project's CI kernel (6.18, x86-64 with the SRSO
 * "Safe RET" mitigation) a struct_ops callback now and then does not run although the
 * kernel calls it (the tcp_cong_state_set tracepoint fired 3014 times where the set_state
 * program ran 2995 times; no recursion misses), and the kernel then takes stale stack
 * contents as its return value: ssthresh became 0x81104110, the low half of the address
 * srso_alias_return_thunk+5. PRR then inflates cwnd to ~10^8, the flow never leaves a
 * retransmission storm and grabs the bottleneck: BPF Reno (even with no callbacks but
 * ssthresh/cong_avoid/undo_cwnd) out-ran kernel Reno by 1.1-1.5x in about one of three
 * 8-flow runs. Kernel-built CCs are plain function calls and never see this.
 * A legitimate ssthresh is TCP_INFINITE_SSTHRESH or below MLTCP_SANE_WND, and so is cwnd;
 * anything else is repaired on the next ACK (pkts_acked / cong_avoid) to what the base
 * algorithm would have set at the loss: ssthresh from prior_cwnd (the cwnd the kernel
 * saved just before asking), cwnd capped at what is in flight + 1 (PRR's own start).
 */
#define MLTCP_INFINITE_SSTHRESH 0x7fffffffU
#define MLTCP_SANE_WND (1U << 20)

static __always_inline bool mltcp_ssthresh_insane(const struct tcp_sock *tp)
{
	return tp->snd_ssthresh != MLTCP_INFINITE_SSTHRESH && tp->snd_ssthresh >= MLTCP_SANE_WND;
}

static __always_inline bool mltcp_wnd_insane(const struct tcp_sock *tp)
{
	return mltcp_ssthresh_insane(tp) || tp->snd_cwnd >= MLTCP_SANE_WND;
}

/* ssthresh: the base algorithm's ssthresh for cwnd == tp->prior_cwnd (computed by caller). */
static __always_inline void mltcp_repair_wnd(struct sock *sk, __u32 ssthresh)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	__u32 cap;

	if (mltcp_ssthresh_insane(tp)) {
		tp->snd_ssthresh = max(ssthresh, 2U);
		cap = in_flight + 1;
	} else {
		cap = max(tp->prior_cwnd, in_flight + 1);
	}
	cap = max(min(cap, MLTCP_SANE_WND - 1), 2U);
	if (tp->snd_cwnd > cap)
		tp->snd_cwnd = cap;
}

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

/* The search's slope while the socket searches, 0 once an adaptive search was given up (the
 * telemetry's `slope`: what tells a searching iteration from one past the search). */
static __always_inline __s64 mltcp_slope_fp(const struct mltcp_state *st)
{
#if MLTCP_ADAPT
	if (st->flags & MLTCP_F_BASE)
		return 0;
#endif
	return MLTCP_SLOPE_FP;
}

/* The slope F follows: the search's, or once the search ended the held one (MLTCP_HOLD_SLOPE_FP). */
static __always_inline __s64 mltcp_f_slope_fp(const struct mltcp_state *st)
{
#if MLTCP_ADAPT
	if (st->flags & MLTCP_F_BASE)
		return MLTCP_HOLD_SLOPE_FP;
#endif
	return MLTCP_SLOPE_FP;
}

/*
 * F(bytes_ratio) in fixed point (1024 = 1.0); bytes_ratio is capped at 1. The loss-damped search
 * (MLTCP_DAMP, docs/cc.md#the-adaptive-step): while the socket searches, each loss episode of the
 * iteration halves F's part above 1 MLTCP_DAMP times: F = 1 + (F - 1) >> (MLTCP_DAMP * losses).
 * Where no schedule exists a search that keeps its F of up to 33 through its own losses pushes
 * its rivals (running as their base CC) into timeouts; setting F = 1 at the first loss stopped
 * that but also took the steep step from jobs that overlap while they part (they lose packets
 * too), so each loss takes a share of the step instead of all of it. With MLTCP_DAMP_AFTER the
 * damping waits until the search has gone that many iterations without progress (st->count):
 * jobs that can part do so in the first iterations of their first search, while each iteration
 * still makes progress (count 0-1), and keep the whole step there; the iterations of a search
 * that has stalled, wherever it runs, are damped. A search a relapse started (backoff > 0) is
 * damped from its first iteration: where no schedule exists the relapses' first iterations,
 * undamped at count 0, made 14 of overload's 36 slowest job iterations.
 */
static __always_inline __u32 mltcp_factor(const struct sock *sk)
{
#if MLTCP_SCALE
	const struct mltcp_state *st = mltcp_st(sk);
	__u64 done, ratio;
	__s64 f;

	if (!st->learned || !st->iter ||
	    (MLTCP_ADAPT && (st->flags & MLTCP_F_BASE) && !MLTCP_HOLD_SLOPE_FP))
		return MLTCP_FP_ONE;
	done = tcp_sk(sk)->bytes_acked - st->iter_start_acked;
	ratio = (done << MLTCP_FP_SHIFT) / st->learned;
	if (ratio > MLTCP_FP_ONE)
		ratio = MLTCP_FP_ONE;
	f = (__s64)MLTCP_INTERCEPT_FP + ((mltcp_f_slope_fp(st) * (__s64)ratio) >> MLTCP_FP_SHIFT);
	if (f < 1)
		f = 1;
	if (f > (64 << MLTCP_FP_SHIFT))
		f = 64 << MLTCP_FP_SHIFT;
#if MLTCP_DAMP
	if (f > MLTCP_FP_ONE && st->losses && !(st->flags & MLTCP_F_BASE) &&
	    (st->count >= MLTCP_DAMP_AFTER || (st->flags & MLTCP_F_BACKOFF))) {
		__u32 shift = MLTCP_DAMP * st->losses;

		if (shift > MLTCP_DAMP_SHIFT_MAX)
			shift = MLTCP_DAMP_SHIFT_MAX;
		f = MLTCP_FP_ONE + ((f - MLTCP_FP_ONE) >> shift);
	}
#endif
	return (__u32)f;
#else
	return MLTCP_FP_ONE;
#endif
}

/*
 * Scale an "ACKs per +1 cwnd" count w by 1/F: the window then grows F times as fast
 * (Reno: cwnd += F / cwnd per ACKed segment). F == 1 returns w unchanged, bit for bit.
 */
static __always_inline __u32 mltcp_scale_cnt(__u32 w, __u32 f)
{
	__u64 s;

	if (f == MLTCP_FP_ONE)
		return w;
	s = ((__u64)w << MLTCP_FP_SHIFT) / f;
	if (s < 1)
		s = 1;
	if (s > 0xffffffffULL)
		s = 0xffffffffULL;
	return (__u32)s;
}

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

/*
 * The step that adapts (MLTCP_ADAPT; docs/cc.md#the-adaptive-step). MLTCP is gradient descent with
 * one step per iteration: a steep slope (and restart) moves a job's phase out of its rivals'
 * within a few iterations where a schedule without overlap exists, and where none exists it
 * keeps handing the link from one job to the other, which costs the tail. So the socket searches
 * only while the search pays: per iteration it takes its rate (bytes acknowledged over the time
 * from its first send to its last ACK); a rate over the best one by MLTCP_ADAPT_GAIN_FP is
 * progress (the phase moved out of an overlap). MLTCP_ADAPT_PATIENCE iterations without progress
 * end the search: F = 1 and no restart, its base CC, whether the jobs are apart (nothing left to
 * gain) or cannot be (nothing to find). Not searching, it follows its usual rate: the base CC's
 * own, from its first iteration on (a searching socket's rate is no measure of it: where the link
 * is contended it takes the link from rivals that run as their base CC, and its rate was twice
 * theirs), then a moving average, 1/4 per iteration. Iterations in a row under it by
 * MLTCP_ADAPT_DROP_FP (phases that were apart collide again, or a new rival came) start a new
 * search, whose best so far is that usual rate: getting back to it is no progress.
 * The backoff: MLTCP_ADAPT_RELAPSE such iterations start the first new search, and each one
 * doubles the number the next needs (up to MLTCP_ADAPT_BACKOFF_MAX). Where the link is contended
 * for good, the base CC's own swings trip the relapse rule every few iterations and each search
 * only costs the tail; phases that really collide again stay slow, so the search still comes,
 * later. Progress in a search does not reset it: there, too, it is the rivals' loss.
 * A timeout ends a relapse's search: an iteration that had a retransmission timeout in a search
 * a relapse started ends it at once, and the next relapse needs twice as many slow iterations
 * again. Where no schedule exists the searches' slope-32 phases, each restarting from the initial
 * window, time out several times as often as the base CC's, and a phase waiting for a timeout is
 * what made the jobs' slowest iterations. The first search is exempt: jobs started together time
 * out in their first iterations also where a schedule exists (3jobs-slack-sync, the demo), and
 * ending the search there kept them from parting. Before any relapse the backoff is 0, so that
 * is what tells the first search from a relapse's.
 */
static __always_inline __u32 mltcp_relapse_after(const struct mltcp_state *st)
{
	__u32 n = MLTCP_ADAPT_RELAPSE << ((st->flags & MLTCP_F_BACKOFF) >> MLTCP_F_BACKOFF_SHIFT);

	return n < MLTCP_ADAPT_BACKOFF_MAX ? n : MLTCP_ADAPT_BACKOFF_MAX;
}

/* One more search that did not pay: the next relapse needs twice the slow iterations. */
static __always_inline void mltcp_back_off(struct mltcp_state *st)
{
	__u8 backoff = (st->flags & MLTCP_F_BACKOFF) >> MLTCP_F_BACKOFF_SHIFT;

	if ((MLTCP_ADAPT_RELAPSE << backoff) < MLTCP_ADAPT_BACKOFF_MAX)
		backoff++;
	st->flags = (st->flags & ~MLTCP_F_BACKOFF) | (__u8)(backoff << MLTCP_F_BACKOFF_SHIFT);
}

/* The search ends: F = 1 and no restart; the next iteration, the base CC's, sets the usual rate. */
static __always_inline void mltcp_end_search(struct mltcp_state *st)
{
	st->flags |= MLTCP_F_BASE;
	st->rate_ref = 0;
	st->count = 0;
}

/*
 * The loss signal (MLTCP_CALM_BY; docs/cc.md#the-adaptive-step): jobs that can part lose less as
 * their phases move apart and stay apart, jobs that cannot keep losing. An iteration of the first
 * search is calm when its loss episodes fell to at most 1/2^MLTCP_CALM_SHIFT of the most an
 * iteration of it had (some loss seen). A first search that has seen losses and not two calm
 * iterations in a row by the end of its iteration MLTCP_CALM_BY ends, and as no schedule was
 * found, a new search then needs the most slow iterations in a row (the backoff at its maximum):
 * where none exists (overload) the first search's iterations 5-9 and the relapses' searches made
 * the tail. One calm iteration is no sign: where no schedule exists a socket's losses fall now
 * and then for one iteration (on overload 5 of 360 first-search iterations 2-6), where jobs part
 * they stay down. A socket whose worst iteration had fewer than 1 << MLTCP_CALM_SHIFT loss
 * episodes (an eighth of it under one; under ECN the demo's sockets lose 0-5 times an iteration)
 * learns nothing from it: there one or two losses at iterations 7-8 after calm ones ended 3 of 24
 * first searches of jobs that parted. Its iterations without loss are calm all the same.
 * Returns true: the search ends.
 */
static __always_inline bool mltcp_calmless(struct mltcp_state *st)
{
#if MLTCP_CALM_BY
	if (st->flags & (MLTCP_F_BACKOFF | MLTCP_F_CALM))
		return false;
	if (st->losses > st->loss_peak)
		st->loss_peak = st->losses;
	if (st->loss_peak && ((__u32)st->losses << MLTCP_CALM_SHIFT) <= st->loss_peak) {
		if (st->flags & MLTCP_F_CALM_LAST) {
			st->flags |= MLTCP_F_CALM;
			return false;
		}
		st->flags |= MLTCP_F_CALM_LAST;
	} else {
		st->flags &= ~MLTCP_F_CALM_LAST;
	}
	return st->loss_peak >= (1 << MLTCP_CALM_SHIFT) && st->iter >= MLTCP_CALM_BY;
#else
	return false;
#endif
}

/* rto: the iteration had a retransmission timeout. */
static __always_inline void mltcp_adapt(struct mltcp_state *st, __u64 bytes, __u64 us, bool rto)
{
#if MLTCP_ADAPT
	__u64 rate, ref = st->rate_ref;

	rate = (bytes << MLTCP_FP_SHIFT) / (us ? us : 1);
	if (rate > 0xffffffffULL)
		rate = 0xffffffffULL;
	if (!(st->flags & MLTCP_F_BASE)) {
		if (mltcp_calmless(st)) {
			mltcp_end_search(st);
			st->flags |= MLTCP_F_BACKOFF;
		} else if (rto && (st->flags & MLTCP_F_BACKOFF)) {
			mltcp_end_search(st);
			mltcp_back_off(st);
		} else if (rate * MLTCP_FP_ONE > ref * (MLTCP_FP_ONE + MLTCP_ADAPT_GAIN_FP)) {
			st->rate_ref = (__u32)rate;
			st->count = 0;
		} else if (++st->count >= MLTCP_ADAPT_PATIENCE) {
			mltcp_end_search(st);
		}
		return;
	}
	if (!ref) {
		st->rate_ref = (__u32)(rate ? rate : 1);
		return;
	}
	if (rate * MLTCP_FP_ONE < ref * (MLTCP_FP_ONE - MLTCP_ADAPT_DROP_FP)) {
		if (++st->count >= mltcp_relapse_after(st)) {
			st->flags &= ~MLTCP_F_BASE;
			st->count = 0;
			mltcp_back_off(st);
		}
		return;
	}
	st->count = 0;
	st->rate_ref = (__u32)((ref * 3 + rate) / 4);
#endif
}

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
_Static_assert(MLTCP_DAMP_AFTER >= 0 && MLTCP_DAMP_AFTER <= MLTCP_ADAPT_PATIENCE,
	       "MLTCP_DAMP_AFTER outside 0..MLTCP_ADAPT_PATIENCE");

#define MLTCP_ASSERT_FITS(type) \
	_Static_assert(sizeof(type) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv), \
		       #type " does not fit in icsk_ca_priv")

#endif /* MLTCP_COMMON_H */
