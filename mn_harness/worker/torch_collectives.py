"""The real-framework collectives: which torch.distributed call each torch_* collective is, the
bytes each worker hands to the network per iteration, and torch detection. Importable without
torch (config validation, the ideal-time arithmetic and the CLI use it on machines without
PyTorch). Names: `torch_` and the synthetic collective's name (reduce_scatter, all_gather,
broadcast, all_to_all), except torch_allreduce, gloo's ring all-reduce.

What gloo sends, per collective and rank, is its schedule in mn_harness/collectives/gloo.py
(measured on gloo's sockets; tests/test_runner_torch.py checks it every run of the suite).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from mn_harness.collectives import gloo

INSTALL_HINT = ("PyTorch, which is not installed: pip install -e '.[torch]' in the harness's venv "
                "(or make test EXTRAS=torch)")


@dataclass(frozen=True)
class TorchCollective:
    name: str  # YAML `collective:` value
    call: str  # torch.distributed function

    def bytes_sent(self, total_bytes: int, n: int, rank: int) -> int:
        return gloo.schedule(self.name, total_bytes, n).sent_by(rank)

    def bytes_sent_per_worker(self, total_bytes: int, n: int) -> int:
        """The most any rank sends (what the slowest link has to carry for the ideal time)."""
        return max(gloo.schedule(self.name, total_bytes, n).bytes_sent_per_rank())


_CALLS = {"torch_allreduce": "all_reduce", "torch_reduce_scatter": "reduce_scatter_tensor",
          "torch_all_gather": "all_gather_into_tensor", "torch_all_to_all": "all_to_all_single",
          "torch_broadcast": "broadcast"}
TORCH_COLLECTIVES: dict[str, TorchCollective] = {name: TorchCollective(name, _CALLS[name]) for name in gloo.NAMES}


def is_torch_collective(name: str) -> bool:
    return name in TORCH_COLLECTIVES


def torch_importable() -> bool:
    """True when `import torch` would find a package (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False
