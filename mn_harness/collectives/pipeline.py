"""Pipeline parallelism: activations forward and gradients backward between stages, 1F1B.

p stages (local ranks in pipeline order), m micro-batches. Forward of micro-batch b on stage s
receives its activations from s-1 (unless s = 0), computes, and sends A bytes to s+1 (unless
last); backward of b receives G bytes of gradients from s+1 (unless last), computes, sends G to
s-1 (unless s = 0). Stage s runs the 1F1B order (PipeDream-Flush / Megatron-LM): min(p-s-1, m)
warm-up forwards, then alternately one forward and one backward, then the remaining backwards.
So stage s sends m*A forward (s < p-1) and m*G backward (s > 0).

`ideal_time` plays this order with fixed compute times and each transfer at its pair's path
rate (one transfer at a time per directed pair): the pipeline phase's ideal duration, bubble
included. The worker runs the same order (mn_harness/worker/pipeline.py).

The record: phases only (a pass has its own compute, so there is no short form), with the keys
micro_batches (required), forward, backward (compute per micro-batch and stage) and grad_bytes."""

from __future__ import annotations

from collections.abc import Callable

from mn_harness.collectives.bandwidth import unit_factor
from mn_harness.collectives.registry import Call, Collective, Ideal, Network
from mn_harness.collectives.schedule import Schedule, Transfer, need_ranks

FORWARD, BACKWARD = "F", "B"
ACTIVATIONS, GRADIENTS = 0, 1  # channels


def one_f_one_b(p: int, m: int, stage: int) -> list[tuple[str, int]]:
    """[(FORWARD|BACKWARD, micro_batch), ...] in the order stage `stage` runs them."""
    warmup = min(p - stage - 1, m)
    order = [(FORWARD, b) for b in range(warmup)]
    for i in range(m - warmup):
        order += [(FORWARD, warmup + i), (BACKWARD, i)]
    order += [(BACKWARD, b) for b in range(m - warmup, m)]
    return order


def pipeline(act_bytes: int, p: int, micro_batches: int, grad_bytes: int | None = None) -> Schedule:
    """The transfers (step = micro-batch): their bytes, pairs and link loads. The order in time
    is the 1F1B order above, not the steps. total_bytes = m * A (one boundary's forward)."""
    need_ranks("pipeline", p)
    if micro_batches < 1:
        raise ValueError("pipeline needs at least one micro-batch")
    grad = act_bytes if grad_bytes is None else grad_bytes
    transfers = [Transfer(b, ACTIVATIONS, b, s, s + 1, act_bytes)
                 for b in range(micro_batches) for s in range(p - 1)]
    transfers += [Transfer(b, GRADIENTS, b, s, s - 1, grad)
                  for b in range(micro_batches) for s in range(1, p) if grad]
    return Schedule("pipeline", p, micro_batches * act_bytes, tuple(transfers), dependent=False)


def ideal_time(p: int, m: int, forward_s: float, backward_s: float, act_bytes: int,
               grad_bytes: int, seconds: Callable[[int, int, int], float]) -> float:
    """Duration of one 1F1B pass: `seconds(src, dst, nbytes)` is a transfer's time alone on
    its path. Every stage runs its order; an operation starts when its input has arrived."""
    need_ranks("pipeline", p)
    orders = [one_f_one_b(p, m, s) for s in range(p)]
    position = [0] * p
    free_at = [0.0] * p  # when each stage's compute is free
    pair_free: dict[tuple[int, int], float] = {}
    arrived: dict[tuple[str, int, int], float] = {}  # (kind, stage, mb) -> input arrival

    def send(src: int, dst: int, nbytes: int, ready: float) -> float:
        start = max(ready, pair_free.get((src, dst), 0.0))
        pair_free[(src, dst)] = end = start + seconds(src, dst, nbytes)
        return end

    progress = True
    while progress:
        progress = False
        for s in range(p):
            while position[s] < len(orders[s]):
                kind, b = orders[s][position[s]]
                needs_input = (kind == FORWARD and s > 0) or (kind == BACKWARD and s < p - 1)
                if needs_input and (kind, s, b) not in arrived:
                    break
                start = max(free_at[s], arrived.get((kind, s, b), 0.0))
                free_at[s] = done = start + (forward_s if kind == FORWARD else backward_s)
                if kind == FORWARD and s < p - 1:
                    arrived[(FORWARD, s + 1, b)] = send(s, s + 1, act_bytes, done)
                if kind == BACKWARD and s > 0:
                    arrived[(BACKWARD, s - 1, b)] = send(s, s - 1, grad_bytes, done)
                position[s] += 1
                progress = True
    if any(position[s] < len(orders[s]) for s in range(p)):  # pragma: no cover - 1F1B never deadlocks
        raise RuntimeError("pipeline schedule deadlocked")
    return max(free_at + list(pair_free.values()))


def _ideal(call: Call, network: Network) -> Ideal:
    """The 1F1B pass played with each transfer at its path's rate; bounded by the slowest
    forward path between consecutive stages (a path, not one link)."""
    def seconds(src: int, dst: int, nbytes: int) -> float:
        return nbytes * 8 / network.path_bps(src, dst)

    grad = call.nbytes if call.grad_bytes is None else call.grad_bytes
    t = ideal_time(call.ranks, call.micro_batches, call.forward_s, call.backward_s, call.nbytes, grad, seconds)
    return Ideal(t, min(network.path_bps(s, s + 1) for s in range(call.ranks - 1)), None)


# busbw: ours, S = m * the activation bytes of one stage boundary
PIPELINE = Collective("pipeline", lambda c: pipeline(c.nbytes, c.ranks, c.micro_batches, c.grad_bytes),
                      unit_factor, short_form=False,
                      phase_keys=("micro_batches", "forward", "backward", "grad_bytes"),
                      required_keys=("micro_batches",), pipeline_pass=True, ideal=_ideal)
