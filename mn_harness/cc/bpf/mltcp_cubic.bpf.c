// SPDX-License-Identifier: GPL-2.0
/*
 * mltcp_cubic: CUBIC (as in the kernel's net/ipv4/tcp_cubic.c: beta 717/1024, C = 0.4,
 * fast convergence, TCP-friendly region, HyStart with ACK-train and delay detection)
 * re-written for BPF, with its window growth scaled by MLTCP's F(bytes_ratio).
 *
 * CUBIC grows cwnd by one segment every `cnt` ACKed segments; MLTCP divides that count
 * by F, so growth (cubic and TCP-friendly region alike) is F times as fast. F == 1 leaves
 * the count untouched, so the algorithm tracks kernel cubic. Differences to the kernel:
 * the HZ comes from the .kconfig map, the "while (ack_cnt > delta)" loop is a division,
 * and HyStart does not bump the kernel's MIB counters.
 */
#include "mltcp_common.h"

#define BICTCP_BETA_SCALE 1024
#define BICTCP_HZ 10	/* 2^10 units per second for the cubic clock */
#define CUBIC_BETA 717	/* 717/1024 ~= 0.7 */
#define CUBIC_BIC_SCALE 41
#define CUBIC_CUBE_RTT_SCALE (CUBIC_BIC_SCALE * 10)
#define CUBIC_BETA_SCALE (8 * (BICTCP_BETA_SCALE + CUBIC_BETA) / 3 / (BICTCP_BETA_SCALE - CUBIC_BETA))
#define CUBIC_CUBE_FACTOR ((__u64)(1ULL << (10 + 3 * BICTCP_HZ)) / (CUBIC_BIC_SCALE * 10))

#define HYSTART_ACK_TRAIN 0x1
#define HYSTART_DELAY 0x2
#define HYSTART_DETECT (HYSTART_ACK_TRAIN | HYSTART_DELAY)
#define HYSTART_LOW_WINDOW 16
#define HYSTART_ACK_DELTA_US 2000
#define HYSTART_MIN_SAMPLES 8
#define HYSTART_DELAY_MIN 4000U
#define HYSTART_DELAY_MAX 16000U
#define GSO_MAX_SIZE_BYTES 65536ULL

extern unsigned long CONFIG_HZ __kconfig;
#define HZ CONFIG_HZ
#define USEC_PER_SEC 1000000UL
#define USEC_PER_MSEC 1000UL
#define tcp_jiffies32 ((__u32)bpf_jiffies64())

struct mltcp_cubic {
	struct mltcp_state ml;	/* must stay first */
	__u32 cnt;		/* increase cwnd by 1 after this many ACKed segments */
	__u32 last_max_cwnd;	/* cwnd before the last reduction (W_max) */
	__u32 last_cwnd;
	__u32 last_time;	/* jiffies of last cnt update */
	__u32 bic_origin_point;
	__u32 bic_K;		/* time to reach W_max, 2^-10 s units */
	__u32 delay_min;	/* min RTT, us */
	__u32 epoch_start;	/* jiffies, 0 = no epoch */
	__u32 ack_cnt;
	__u32 tcp_cwnd;		/* Reno-equivalent window for the TCP-friendly region */
	__u8 sample_cnt;
	__u8 found;
	__u16 pad;
	__u32 round_start;
	__u32 end_seq;
	__u32 last_ack;
	__u32 curr_rtt;
};
MLTCP_ASSERT_FITS(struct mltcp_cubic);

static __always_inline void cubic_reset(struct mltcp_cubic *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->bic_origin_point = 0;
	ca->bic_K = 0;
	ca->delay_min = 0;
	ca->epoch_start = 0;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

static __always_inline void cubic_hystart_reset(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_cubic *ca = inet_csk_ca(sk);

	ca->round_start = ca->last_ack = (__u32)tp->tcp_mstamp;
	ca->end_seq = tp->snd_nxt;
	ca->curr_rtt = ~0U;
	ca->sample_cnt = 0;
}

static __always_inline __u32 usecs_to_jiffies_up(__u32 us)
{
	__u32 per = USEC_PER_SEC / HZ;

	return (us + per - 1) / per;
}

static __always_inline int fls64(__u64 x)
{
	int n = 0;

	if (!x)
		return 0;
	if (x >> 32) { n += 32; x >>= 32; }
	if (x >> 16) { n += 16; x >>= 16; }
	if (x >> 8) { n += 8; x >>= 8; }
	if (x >> 4) { n += 4; x >>= 4; }
	if (x >> 2) { n += 2; x >>= 2; }
	if (x >> 1) { n += 1; x >>= 1; }
	return n + 1;
}

/* cbrt table from the kernel: for x in [0..63], v[x] = cbrt(x << 18) - 1 */
static const __u8 cbrt_v[64] = {
	0, 54, 54, 54, 118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156,
	157, 161, 164, 168, 170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199,
	200, 202, 204, 206, 209, 211, 213, 215, 217, 219, 221, 222, 224, 225, 227, 229,
	231, 232, 234, 236, 237, 239, 240, 242, 244, 245, 246, 248, 250, 251, 252, 254,
};

/* Cube root: table lookup of the top bits, then one Newton-Raphson step (as the kernel). */
static __always_inline __u32 cubic_root(__u64 a)
{
	__u32 x, b, shift;

	if (a < 64)
		return ((__u32)cbrt_v[a & 63] + 35) >> 6;
	b = fls64(a);
	b = ((b * 84) >> 8) - 1;
	shift = (__u32)(a >> (b * 3));
	if (shift >= 64)
		return 0;
	x = ((__u32)(((__u32)cbrt_v[shift] + 10) << b)) >> 6;
	x = 2 * x + (__u32)(a / ((__u64)x * (__u64)(x - 1)));
	return (x * 341) >> 10;
}

static __always_inline void cubic_update(struct mltcp_cubic *ca, __u32 cwnd, __u32 acked)
{
	__u32 delta, bic_target, max_cnt, now = tcp_jiffies32;
	__u64 offs, t;

	ca->ack_cnt += acked;
	if (ca->last_cwnd == cwnd && (__s32)(now - ca->last_time) <= HZ / 32)
		return;
	/* cnt is recomputed at most once per jiffy; reductions clear epoch_start. */
	if (ca->epoch_start && now == ca->last_time)
		goto friendliness;

	ca->last_cwnd = cwnd;
	ca->last_time = now;
	if (ca->epoch_start == 0) {
		ca->epoch_start = now;
		ca->ack_cnt = acked;
		ca->tcp_cwnd = cwnd;
		if (ca->last_max_cwnd <= cwnd) {
			ca->bic_K = 0;
			ca->bic_origin_point = cwnd;
		} else {
			ca->bic_K = cubic_root(CUBIC_CUBE_FACTOR * (ca->last_max_cwnd - cwnd));
			ca->bic_origin_point = ca->last_max_cwnd;
		}
	}

	t = (__s32)(now - ca->epoch_start);
	t += usecs_to_jiffies_up(ca->delay_min);
	t <<= BICTCP_HZ;
	t /= HZ;
	offs = t < ca->bic_K ? ca->bic_K - t : t - ca->bic_K;
	delta = (CUBIC_CUBE_RTT_SCALE * offs * offs * offs) >> (10 + 3 * BICTCP_HZ);
	bic_target = t < ca->bic_K ? ca->bic_origin_point - delta : ca->bic_origin_point + delta;

	if (bic_target > cwnd)
		ca->cnt = cwnd / (bic_target - cwnd);
	else
		ca->cnt = 100 * cwnd;
	/* Unknown bandwidth: do not be too timid at first (5% per RTT). */
	if (ca->last_max_cwnd == 0 && ca->cnt > 20)
		ca->cnt = 20;

friendliness:
	delta = (cwnd * CUBIC_BETA_SCALE) >> 3;
	if (delta && ca->ack_cnt > delta) {
		__u32 n = ca->ack_cnt / delta;

		ca->ack_cnt -= n * delta;
		ca->tcp_cwnd += n;
	}
	if (ca->tcp_cwnd > cwnd) {
		delta = ca->tcp_cwnd - cwnd;
		max_cnt = cwnd / delta;
		if (ca->cnt > max_cnt)
			ca->cnt = max_cnt;
	}
	/* At most +1 segment per 2 ACKed: 1.5x per RTT. */
	ca->cnt = max(ca->cnt, 2U);
}

SEC("struct_ops")
void BPF_PROG(mlcubic_init, struct sock *sk)
{
	mltcp_init(sk);
	cubic_reset(inet_csk_ca(sk));
	cubic_hystart_reset(sk);
}

SEC("struct_ops")
void BPF_PROG(mlcubic_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct mltcp_cubic *ca = inet_csk_ca(sk);
	__u32 now;
	__s32 delta;

	if (ev != CA_EVENT_TX_START)
		return;
	mltcp_tx_start(sk);
	/* Idle (application limited): shift the epoch so growth stays on the cubic curve. */
	now = tcp_jiffies32;
	delta = now - tcp_sk(sk)->lsndtime;
	if (ca->epoch_start && delta > 0) {
		ca->epoch_start += delta;
		if (after(ca->epoch_start, now))
			ca->epoch_start = now;
	}
}

static __always_inline void mlcubic_guard(struct sock *sk);

SEC("struct_ops")
void BPF_PROG(mlcubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_cubic *ca = inet_csk_ca(sk);

	mlcubic_guard(sk);
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		if (after(ack, ca->end_seq))
			cubic_hystart_reset(sk);
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cubic_update(ca, tp->snd_cwnd, acked);
	tcp_cong_avoid_ai(tp, mltcp_scale_cnt(ca->cnt, mltcp_factor(sk)), acked);
}

/* CUBIC's multiplicative decrease for a loss seen at window `cwnd`. */
static __always_inline __u32 cubic_ssthresh_at(struct sock *sk, __u32 cwnd)
{
	struct mltcp_cubic *ca = inet_csk_ca(sk);

	ca->epoch_start = 0;
	/* Fast convergence: release bandwidth when W_max shrinks. */
	if (cwnd < ca->last_max_cwnd)
		ca->last_max_cwnd = (cwnd * (BICTCP_BETA_SCALE + CUBIC_BETA)) /
				    (2 * BICTCP_BETA_SCALE);
	else
		ca->last_max_cwnd = cwnd;
	return max((cwnd * CUBIC_BETA) / BICTCP_BETA_SCALE, 2U);
}

SEC("struct_ops")
__u32 BPF_PROG(mlcubic_ssthresh, struct sock *sk)
{
	return cubic_ssthresh_at(sk, tcp_sk(sk)->snd_cwnd);
}

/* A lost ssthresh/undo_cwnd call left garbage (see mltcp_tcp.h): redo CUBIC's. */
static __always_inline void mlcubic_guard(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (mltcp_wnd_insane(tp))
		mltcp_repair_wnd(sk, mltcp_ssthresh_insane(tp) ?
				 cubic_ssthresh_at(sk, tp->prior_cwnd) : 0);
}

SEC("struct_ops")
void BPF_PROG(mlcubic_set_state, struct sock *sk, __u8 new_state)
{
	mltcp_set_state(sk, new_state);
	if (new_state == TCP_CA_Loss) {
		cubic_reset(inet_csk_ca(sk));
		cubic_hystart_reset(sk);
	}
}

static __always_inline __u32 hystart_ack_delay(const struct sock *sk)
{
	unsigned long rate = sk->sk_pacing_rate;

	if (!rate)
		return 0;
	return min((__u64)USEC_PER_MSEC, GSO_MAX_SIZE_BYTES * 4 * USEC_PER_SEC / rate);
}

static __always_inline void hystart_update(struct sock *sk, __u32 delay)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_cubic *ca = inet_csk_ca(sk);
	__u32 threshold;

	if (HYSTART_DETECT & HYSTART_ACK_TRAIN) {
		__u32 now = (__u32)tp->tcp_mstamp;

		if ((__s32)(now - ca->last_ack) <= HYSTART_ACK_DELTA_US) {
			ca->last_ack = now;
			threshold = ca->delay_min + hystart_ack_delay(sk);
			/* Unpaced: ACK train longer than delay_min / 2 ends slow start. */
			if (sk->sk_pacing_status == SK_PACING_NONE)
				threshold >>= 1;
			if ((__s32)(now - ca->round_start) > threshold) {
				ca->found = 1;
				tp->snd_ssthresh = tp->snd_cwnd;
			}
		}
	}
	if (HYSTART_DETECT & HYSTART_DELAY) {
		if (ca->curr_rtt > delay)
			ca->curr_rtt = delay;
		if (ca->sample_cnt < HYSTART_MIN_SAMPLES) {
			ca->sample_cnt++;
		} else {
			__u32 thresh = ca->delay_min >> 3;

			thresh = thresh < HYSTART_DELAY_MIN ? HYSTART_DELAY_MIN :
				 thresh > HYSTART_DELAY_MAX ? HYSTART_DELAY_MAX : thresh;
			if (ca->curr_rtt > ca->delay_min + thresh) {
				ca->found = 1;
				tp->snd_ssthresh = tp->snd_cwnd;
			}
		}
	}
}

SEC("struct_ops")
void BPF_PROG(mlcubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_cubic *ca = inet_csk_ca(sk);
	__u32 delay;

	mlcubic_guard(sk);
	mltcp_acked(sk, sample);
	if (sample->rtt_us < 0)
		return;
	/* Discard delay samples right after fast recovery. */
	if (ca->epoch_start && (__s32)(tcp_jiffies32 - ca->epoch_start) < HZ)
		return;
	delay = sample->rtt_us;
	if (delay == 0)
		delay = 1;
	if (ca->delay_min == 0 || ca->delay_min > delay)
		ca->delay_min = delay;
	if (!ca->found && tcp_in_slow_start(tp) && tp->snd_cwnd >= HYSTART_LOW_WINDOW)
		hystart_update(sk, delay);
}

SEC("struct_ops")
__u32 BPF_PROG(mlcubic_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(mlcubic_release, struct sock *sk)
{
	mltcp_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops MLTCP_NAME = {
	.init		= (void *)mlcubic_init,
	.ssthresh	= (void *)mlcubic_ssthresh,
	.cong_avoid	= (void *)mlcubic_cong_avoid,
	.set_state	= (void *)mlcubic_set_state,
	.undo_cwnd	= (void *)mlcubic_undo_cwnd,
	.cwnd_event	= (void *)mlcubic_cwnd_event,
	.pkts_acked	= (void *)mlcubic_pkts_acked,
	.release	= (void *)mlcubic_release,
	.name		= MLTCP_STR(MLTCP_NAME),
};
