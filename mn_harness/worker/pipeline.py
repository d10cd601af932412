"""One stage's share of a pipeline pass (collectives/pipeline.py): the 1F1B order, each forward
receiving its activations from the stage before and each backward its gradients from the stage
after, compute by sleeping, sends posted asynchronously to the transport.

Runs on the worker's main thread (a pass interleaves compute and communication); the program
waits for the communication stream to be idle before a pass (jobs/program.py)."""

from __future__ import annotations

import time

from mn_harness.collectives.pipeline import ACTIVATIONS, BACKWARD, FORWARD, GRADIENTS, one_f_one_b
from mn_harness.worker.collective import tag
from mn_harness.worker.program_ops import PipelineOp
from mn_harness.worker.transport import Transport
from mn_harness.worker.transport_op import TransportOp


def run_pass(transport: Transport, op: PipelineOp, stage: int, iteration: int) -> int:
    """Returns the bytes this stage sent."""
    ranks = op.ranks
    p, m = len(ranks), op.micro_batches
    act, grad = op.bytes, op.grad_bytes
    sends: list[TransportOp] = []
    sent = 0
    for kind, b in one_f_one_b(p, m, stage):
        if kind == FORWARD:
            if stage > 0:
                transport.recv(ranks[stage - 1], act, tag(iteration, op.id, b, ACTIVATIONS, b, 0)).wait()
            time.sleep(op.forward_s)
            if stage < p - 1:
                sends.append(transport.send(ranks[stage + 1], act, tag(iteration, op.id, b, ACTIVATIONS, b, 0)))
                sent += act
        elif kind == BACKWARD:
            if stage < p - 1 and grad:
                transport.recv(ranks[stage + 1], grad, tag(iteration, op.id, b, GRADIENTS, b, 0)).wait()
            time.sleep(op.backward_s)
            if stage > 0 and grad:
                sends.append(transport.send(ranks[stage - 1], grad, tag(iteration, op.id, b, GRADIENTS, b, 0)))
                sent += grad
    for s in sends:
        s.wait()
    return sent
