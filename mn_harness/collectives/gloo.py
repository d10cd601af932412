"""What PyTorch's gloo backend puts on the wire for the torch_* collectives (real traffic, run by
torch.distributed in mn_harness/worker/torch_worker.py): their schedules, so the ideal time,
the link loads, summary.json's bytes and the throughput's per-link ranks count real jobs as they
count synthetic ones. Nothing executes these schedules; gloo does its own.

S bytes become a fp32 tensor of ceil(S/4) elements (4 * ceil(S/4) bytes, "size"), n ranks.
Measured on gloo's sockets (bytes acknowledged, 3 workers, 3 MB: within 0.1%, its message
headers; tests/test_runner_torch.py checks every collective on every run of the suite):

* torch_allreduce: gloo's ring (allreduce.cc), reduce-scatter then all-gather, rank r sending to
  r-1 and receiving from r+1 (the opposite of the synthetic ring), blocks of ceil(size/n):
  2(n-1)/n * size per rank (gloo pipelines each block in segments of <= 1 MB; a schedule keeps
  the blocks whole);
* torch_reduce_scatter: gloo moves as much as its all-reduce (ProcessGroupGloo reduces the whole
  tensor, then each rank keeps its part): the same transfers;
* torch_all_gather: a ring of n-1 steps of ceil(size/n) (S = the gathered tensor, nccl-tests'
  convention): (n-1)/n * size;
* torch_all_to_all: ceil(size/n) from every rank to every other: (n-1)/n * size;
* torch_broadcast: the root (rank 0) sends the whole tensor to every other rank, (n-1) * size;
  the others send nothing.
"""

from __future__ import annotations

from mn_harness.collectives.schedule import Schedule, Transfer, ceil_div, need_ranks

NAMES = ("torch_allreduce", "torch_reduce_scatter", "torch_all_gather", "torch_all_to_all",
         "torch_broadcast")


def tensor_bytes(total_bytes: int) -> int:
    """The fp32 tensor's bytes: whole elements."""
    return 4 * ceil_div(total_bytes, 4)


def _ring_allreduce(name: str, total_bytes: int, n: int) -> Schedule:
    need_ranks(name, n)
    block = ceil_div(tensor_bytes(total_bytes), n)
    left = [Transfer(k, 0, (r + k + 1) % n, r, (r - 1) % n, block, reduce=True)
            for k in range(n - 1) for r in range(n)]
    left += [Transfer(n - 1 + k, 0, (r + k) % n, r, (r - 1) % n, block)
             for k in range(n - 1) for r in range(n)]
    return Schedule(name, n, total_bytes, tuple(left))


def _all_gather(total_bytes: int, n: int) -> Schedule:
    need_ranks("torch_all_gather", n)
    block = ceil_div(tensor_bytes(total_bytes), n)
    return Schedule("torch_all_gather", n, total_bytes,
                    tuple(Transfer(k, 0, (r - k) % n, r, (r + 1) % n, block) for k in range(n - 1) for r in range(n)))


def _all_to_all(total_bytes: int, n: int) -> Schedule:
    need_ranks("torch_all_to_all", n)
    block = ceil_div(tensor_bytes(total_bytes), n)
    return Schedule("torch_all_to_all", n, total_bytes,
                    tuple(Transfer(k - 1, 0, (r + k) % n, r, (r + k) % n, block)
                          for k in range(1, n) for r in range(n)), dependent=False)


def _broadcast(total_bytes: int, n: int) -> Schedule:
    need_ranks("torch_broadcast", n)
    size = tensor_bytes(total_bytes)
    return Schedule("torch_broadcast", n, total_bytes,
                    tuple(Transfer(0, 0, 0, 0, d, size) for d in range(1, n)), dependent=False)


def schedule(collective: str, total_bytes: int, n: int) -> Schedule:
    if collective in ("torch_allreduce", "torch_reduce_scatter"):
        return _ring_allreduce(collective, total_bytes, n)
    if collective == "torch_all_gather":
        return _all_gather(total_bytes, n)
    if collective == "torch_all_to_all":
        return _all_to_all(total_bytes, n)
    if collective == "torch_broadcast":
        return _broadcast(total_bytes, n)
    raise ValueError(f"unknown torch collective {collective!r} (known: {', '.join(NAMES)})")
