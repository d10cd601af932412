/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Part of mltcp_common.h (included from it, after struct mltcp_state and its flags): MLTCP's
 * factor F over an iteration (the search's slope, or the held one past it, with the loss-damped
 * search) and the scaling of the base algorithm's increase by it.
 */
#ifndef MLTCP_FACTOR_H
#define MLTCP_FACTOR_H

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

#endif /* MLTCP_FACTOR_H */
