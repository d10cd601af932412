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

Their records: short form only (the torch worker runs one collective per iteration), run by
torch.distributed (`torch_call`: the function mn_harness/worker/torch_worker.py calls), the bus
bandwidth factor of their synthetic counterpart, and PyTorch needed on this machine — found
without importing it (that takes seconds), so validation says so on machines without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from mn_harness.collectives.registry import TORCH, Collective
from mn_harness.collectives.schedule import Schedule, Transfer, ceil_div, need_ranks

INSTALL_HINT = ("PyTorch, which is not installed: pip install -e '.[torch]' in the harness's venv "
                "(or make test EXTRAS=torch)")


def torch_importable() -> bool:
    """True when `import torch` would find a package (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def missing_torch() -> str | None:
    return None if torch_importable() else INSTALL_HINT


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


def _record(name: str, schedule: Callable[[int, int], Schedule], torch_call: str, counterpart: str) -> Collective:
    return Collective(name, lambda c: schedule(c.nbytes, c.ranks), None, engine=TORCH, phase=False,
                      torch_call=torch_call, counterpart=counterpart, missing=missing_torch)


RECORDS = (
    _record("torch_allreduce", lambda s, n: _ring_allreduce("torch_allreduce", s, n), "all_reduce", "ring_allreduce"),
    _record("torch_reduce_scatter", lambda s, n: _ring_allreduce("torch_reduce_scatter", s, n),
            "reduce_scatter_tensor", "reduce_scatter"),
    _record("torch_all_gather", _all_gather, "all_gather_into_tensor", "all_gather"),
    _record("torch_all_to_all", _all_to_all, "all_to_all_single", "all_to_all"),
    _record("torch_broadcast", _broadcast, "broadcast", "broadcast"),
)
