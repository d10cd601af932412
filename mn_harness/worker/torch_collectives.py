"""The real-framework collectives: names, what torch.distributed call each one is, and the bytes
each worker hands to the network per iteration. Importable without torch (config validation,
the ideal-time arithmetic and the CLI use it on machines without PyTorch).

S = the job's bytes_per_iteration, n = workers. The byte counts are those of gloo's algorithms
(PyTorch's CPU backend): all-reduce is a ring (reduce-scatter then all-gather, segments of at
most 1 MB, two in flight), 2(n-1)/n * S per worker; all-gather and reduce-scatter move
(n-1)/n * S per worker (S = the full, all-ranks tensor, nccl-tests convention); all-to-all sends
S/n to each of the n-1 others; broadcast sends S from the root to each other rank (reported as
the mean per worker, (n-1)/n * S). tests/worker/test_torch_worker.py checks them against the
bytes the kernel counted on the sockets."""

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
    send_factor: str  # bytes per worker / S, as a formula of n (documentation and tests)

    def bytes_sent_per_worker(self, total_bytes: int, n: int) -> int:
        elements = math.ceil(total_bytes / 4)  # fp32
        size = 4 * elements
        if self.name == "torch_allreduce":
            return round(2 * (n - 1) * size / n)
        return round((n - 1) * size / n)


TORCH_COLLECTIVES: dict[str, TorchCollective] = {
    c.name: c for c in (
        TorchCollective("torch_allreduce", "all_reduce", "2(n-1)/n"),
        TorchCollective("torch_allgather", "all_gather_into_tensor", "(n-1)/n"),
        TorchCollective("torch_reduce_scatter", "reduce_scatter_tensor", "(n-1)/n"),
        TorchCollective("torch_alltoall", "all_to_all_single", "(n-1)/n"),
        TorchCollective("torch_broadcast", "broadcast", "(n-1)/n (mean; the root sends (n-1)S)"),
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
