// SPDX-License-Identifier: GPL-2.0
/*
 * mltcp_reno: TCP Reno whose congestion-avoidance increase is scaled by MLTCP's
 * F(bytes_ratio) = slope * bytes_ratio + intercept (cwnd += F / cwnd per ACKed segment).
 * Slow start, loss response (ssthresh = cwnd / 2) and undo are the kernel's own Reno
 * functions, called as kfuncs, so with F == 1 this is Reno exactly.
 */
#include "mltcp_common.h"

struct mltcp_reno {
	struct mltcp_state ml;
};
MLTCP_ASSERT_FITS(struct mltcp_reno);

/* A lost ssthresh/undo_cwnd call left garbage (see mltcp_tcp.h): redo Reno's. */
static __always_inline void mlreno_guard(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (mltcp_wnd_insane(tp))
		mltcp_repair_wnd(sk, tp->prior_cwnd >> 1);
}

SEC("struct_ops")
void BPF_PROG(mlreno_init, struct sock *sk)
{
	mltcp_init(sk);
}

SEC("struct_ops")
void BPF_PROG(mlreno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	mlreno_guard(sk);
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
__u32 BPF_PROG(mlreno_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(mlreno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(mlreno_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_TX_START)
		mltcp_tx_start(sk);
}

SEC("struct_ops")
void BPF_PROG(mlreno_set_state, struct sock *sk, __u8 new_state)
{
	mltcp_set_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(mlreno_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	mlreno_guard(sk);
	mltcp_acked(sk, sample);
}

SEC("struct_ops")
void BPF_PROG(mlreno_release, struct sock *sk)
{
	mltcp_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops MLTCP_NAME = {
	.init		= (void *)mlreno_init,
	.ssthresh	= (void *)mlreno_ssthresh,
	.cong_avoid	= (void *)mlreno_cong_avoid,
	.undo_cwnd	= (void *)mlreno_undo_cwnd,
	.cwnd_event	= (void *)mlreno_cwnd_event,
	.set_state	= (void *)mlreno_set_state,
	.pkts_acked	= (void *)mlreno_pkts_acked,
	.release	= (void *)mlreno_release,
	.name		= MLTCP_STR(MLTCP_NAME),
};
