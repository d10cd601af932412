// SPDX-License-Identifier: GPL-2.0
/*
 * dctcp / mltcp_dctcp: DCTCP (as the kernel's net/ipv4/tcp_dctcp.c: alpha EWMA with
 * g = 1/16, cwnd reduced by alpha/2 on ECN-echo, receiver-side CE state machine) re-written
 * for BPF because the target kernels ship no DCTCP module. Built with -DMLTCP_SCALE=0 it is
 * plain DCTCP (iteration telemetry still recorded); with MLTCP_SCALE=1 its Reno-style
 * additive increase is scaled by MLTCP's F(bytes_ratio) like mltcp_reno.
 *
 * Without ECN negotiated the kernel swaps in a "dctcp-reno" ops struct; a BPF program
 * cannot swap ops, so this one remembers the fact and behaves as Reno itself. It also
 * cannot clear the ECT bits the kernel set for the handshake (INET_ECN_dontxmit), which
 * only matters on a path that marks but whose receiver refused ECN.
 */
#include "mltcp_common.h"

#define DCTCP_MAX_ALPHA 1024U
#define DCTCP_SHIFT_G 4		/* g = 1/16 */
#define ICSK_ACK_TIMER_BIT 2
#define ICSK_ACK_NOW_BIT 16

struct mltcp_dctcp {
	struct mltcp_state ml;	/* must stay first */
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 prior_rcv_nxt;
	__u32 alpha;
	__u32 next_seq;
	__u32 ce_state;
	__u32 loss_cwnd;
	__u32 reno_fallback;
};
MLTCP_ASSERT_FITS(struct mltcp_dctcp);

static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct mltcp_dctcp *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

SEC("struct_ops")
void BPF_PROG(mldctcp_init, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_dctcp *ca = inet_csk_ca(sk);

	mltcp_init(sk);
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->alpha = DCTCP_MAX_ALPHA;
	ca->loss_cwnd = 0;
	ca->ce_state = 0;
	ca->reno_fallback = !((tp->ecn_flags & MLTCP_ECN_MODE_ANY) ||
			      sk->__sk_common.skc_state == TCP_LISTEN ||
			      sk->__sk_common.skc_state == TCP_CLOSE);
	dctcp_reset(tp, ca);
}

/* DCTCP's (or the Reno fallback's) ssthresh for a loss seen at window `cwnd`. */
static __always_inline __u32 dctcp_ssthresh_at(struct sock *sk, __u32 cwnd)
{
	struct mltcp_dctcp *ca = inet_csk_ca(sk);

	if (ca->reno_fallback)
		return max(cwnd >> 1U, 2U);
	ca->loss_cwnd = cwnd;
	return max(cwnd - ((cwnd * ca->alpha) >> 11U), 2U);
}

SEC("struct_ops")
__u32 BPF_PROG(mldctcp_ssthresh, struct sock *sk)
{
	return dctcp_ssthresh_at(sk, tcp_sk(sk)->snd_cwnd);
}

/* A lost ssthresh/undo_cwnd call left garbage (see mltcp_tcp.h): redo DCTCP's. */
static __always_inline void mldctcp_guard(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (mltcp_wnd_insane(tp))
		mltcp_repair_wnd(sk, mltcp_ssthresh_insane(tp) ?
				 dctcp_ssthresh_at(sk, tp->prior_cwnd) : 0);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_dctcp *ca = inet_csk_ca(sk);

	if (ca->reno_fallback)
		return;
	/* Once per RTT: alpha = (1 - g) * alpha + g * (fraction of CE-marked deliveries). */
	if (!before(tp->snd_una, ca->next_seq)) {
		__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
		__u32 alpha = ca->alpha;
		__u32 dec = alpha >> DCTCP_SHIFT_G;

		alpha -= dec ? dec : alpha;	/* min_not_zero(alpha, alpha >> g) */
		if (delivered_ce) {
			__u32 delivered = tp->delivered - ca->old_delivered;

			delivered_ce <<= (10 - DCTCP_SHIFT_G);
			delivered_ce /= max(1U, delivered);
			alpha = min(alpha + delivered_ce, DCTCP_MAX_ALPHA);
		}
		ca->alpha = alpha;
		dctcp_reset(tp, ca);
	}
}

static __always_inline void dctcp_react_to_loss(struct sock *sk)
{
	struct mltcp_dctcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = max(tp->snd_cwnd >> 1U, 2U);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_set_state, struct sock *sk, __u8 new_state)
{
	struct mltcp_dctcp *ca = inet_csk_ca(sk);

	mltcp_set_state(sk, new_state);
	if (ca->reno_fallback)
		return;
	if (new_state == TCP_CA_Recovery &&
	    new_state != BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state))
		dctcp_react_to_loss(sk);
}

static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state == 1)
		tp->ecn_flags |= MLTCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~MLTCP_ECN_DEMAND_CWR;
}

/* Receiver side: echo every CE-state change at once, flushing a delayed ACK first. */
static __always_inline void dctcp_ece_ack_update(struct sock *sk, enum tcp_ca_event ev,
						 struct mltcp_dctcp *ca)
{
	__u32 new_ce_state = ev == CA_EVENT_ECN_IS_CE ? 1 : 0;

	if (ca->ce_state != new_ce_state) {
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER_BIT) {
			dctcp_ece_ack_cwr(sk, ca->ce_state);
			bpf_tcp_send_ack(sk, ca->prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW_BIT;
	}
	ca->prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
	ca->ce_state = new_ce_state;
	dctcp_ece_ack_cwr(sk, new_ce_state);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct mltcp_dctcp *ca = inet_csk_ca(sk);

	switch (ev) {
	case CA_EVENT_TX_START:
		mltcp_tx_start(sk);
		break;
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		if (!ca->reno_fallback)
			dctcp_ece_ack_update(sk, ev, ca);
		break;
	case CA_EVENT_LOSS:
		if (!ca->reno_fallback)
			dctcp_react_to_loss(sk);
		break;
	default:
		break;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(mldctcp_undo_cwnd, struct sock *sk)
{
	const struct mltcp_dctcp *ca = inet_csk_ca(sk);

	if (ca->reno_fallback)
		return tcp_reno_undo_cwnd(sk);
	return max(tcp_sk(sk)->snd_cwnd, ca->loss_cwnd);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	mldctcp_guard(sk);
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, mltcp_scale_cnt(tp->snd_cwnd, mltcp_factor(sk)), acked);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	mldctcp_guard(sk);
	mltcp_acked(sk, sample);
}

SEC("struct_ops")
void BPF_PROG(mldctcp_release, struct sock *sk)
{
	mltcp_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops MLTCP_NAME = {
	.init		= (void *)mldctcp_init,
	.in_ack_event	= (void *)mldctcp_in_ack_event,
	.cwnd_event	= (void *)mldctcp_cwnd_event,
	.ssthresh	= (void *)mldctcp_ssthresh,
	.cong_avoid	= (void *)mldctcp_cong_avoid,
	.undo_cwnd	= (void *)mldctcp_undo_cwnd,
	.set_state	= (void *)mldctcp_set_state,
	.pkts_acked	= (void *)mldctcp_pkts_acked,
	.release	= (void *)mldctcp_release,
	.flags		= MLTCP_CONG_NEEDS_ECN,
	.name		= MLTCP_STR(MLTCP_NAME),
};
