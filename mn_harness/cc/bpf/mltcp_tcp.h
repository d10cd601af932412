/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Part of mltcp_common.h (included from it, after vmlinux.h and min/max): the kernel's TCP
 * helpers a BPF congestion control needs, re-done where the kernel's are static inline, and the
 * guard against lost struct_ops callbacks every variant applies on each ACK.
 */
#ifndef MLTCP_TCP_H
#define MLTCP_TCP_H

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

#endif /* MLTCP_TCP_H */
