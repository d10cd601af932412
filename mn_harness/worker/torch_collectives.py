"""The real-framework collectives: names, what torch.distributed call each one is, and the bytes
each worker hands to the network per iteration. Importable without torch (config validation,
the ideal-time arithmetic and the CLI use it on machines without PyTorch). Names: `torch_` and
the synthetic collective's name (reduce_scatter, all_gather, broadcast, all_to_all), except
torch_allreduce, gloo's ring all-reduce.

S = the job's bytes_per_iteration (a fp32 tensor, whole elements), n = workers. The bytes each
rank sends are those of gloo's algorithms (PyTorch's CPU backend), measured on the job's sockets
(docs/fidelity.md; tests/test_runner_torch.py checks them): all-reduce is a ring
(reduce-scatter then all-gather, segments of at most 1 MB, two in flight), 2(n-1)/n * S per
rank; gloo's reduce-scatter moves as much as its all-reduce, 2(n-1)/n * S; all-gather (n-1)/n * S
(S = the full, all-ranks tensor, nccl-tests convention); all-to-all S/n to each of the n-1
others; broadcast: the root sends S to every other rank, (n-1) * S, the others nothing.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass

INSTALL_HINT = ("PyTorch, which is not installed: pip install -e '.[torch]' in the harness's venv "
                "(or make test EXTRAS=torch)")


@dataclass(frozen=True)
class TorchCollective:
    name: str  # YAML `collective:` value
    call: str  # torch.distributed function
    factor: float  # bytes rank r sends / S is factor * (n-1)/n, or (n-1) at the root of a broadcast
    root_only: bool = False  # broadcast: only rank 0 sends

    def bytes_sent(self, total_bytes: int, n: int, rank: int) -> int:
        size = 4 * math.ceil(total_bytes / 4)  # fp32
        if self.root_only:
            return (n - 1) * size if rank == 0 else 0
        return round(self.factor * (n - 1) * size / n)

    def bytes_sent_per_worker(self, total_bytes: int, n: int) -> int:
        """The most any rank sends (what the slowest link has to carry for the ideal time)."""
        return max(self.bytes_sent(total_bytes, n, rank) for rank in range(n))


TORCH_COLLECTIVES: dict[str, TorchCollective] = {
    c.name: c for c in (
        TorchCollective("torch_allreduce", "all_reduce", 2.0),
        TorchCollective("torch_all_gather", "all_gather_into_tensor", 1.0),
        TorchCollective("torch_reduce_scatter", "reduce_scatter_tensor", 2.0),
        TorchCollective("torch_all_to_all", "all_to_all_single", 1.0),
        TorchCollective("torch_broadcast", "broadcast", 1.0, root_only=True),
    )
}


def is_torch_collective(name: str) -> bool:
    return name in TORCH_COLLECTIVES


def torch_importable() -> bool:
    """True when `import torch` would find a package (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False
