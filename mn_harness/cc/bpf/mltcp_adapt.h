/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Part of mltcp_common.h (included from it, after struct mltcp_state and its flags): the step
 * that adapts, which decides per socket and iteration whether it searches (slope, restart) or
 * runs past the search (its base CC, or the held slope), and the window restart a search uses.
 */
#ifndef MLTCP_ADAPT_H
#define MLTCP_ADAPT_H

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

#endif /* MLTCP_ADAPT_H */
