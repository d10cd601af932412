"""The torch collectives' table: names the config accepts, bytes per worker, torch detection."""

import subprocess
import sys

from mn_harness.config.model import COLLECTIVES
from mn_harness.worker.torch_collectives import TORCH_COLLECTIVES, is_torch_collective


def test_every_torch_collective_is_a_config_collective():
    assert set(TORCH_COLLECTIVES) <= set(COLLECTIVES)
    assert is_torch_collective("torch_allreduce") and not is_torch_collective("ring_allreduce")


def test_bytes_per_worker_follow_gloos_algorithms():
    allreduce = TORCH_COLLECTIVES["torch_allreduce"]
    assert allreduce.bytes_sent_per_worker(25_000_000, 2) == 25_000_000
    assert allreduce.bytes_sent_per_worker(12_000_000, 3) == 16_000_000  # 2(n-1)/n
    assert TORCH_COLLECTIVES["torch_all_gather"].bytes_sent_per_worker(12_000_000, 3) == 8_000_000
    assert TORCH_COLLECTIVES["torch_all_to_all"].bytes_sent_per_worker(12_000_000, 4) == 9_000_000
    assert TORCH_COLLECTIVES["torch_reduce_scatter"].bytes_sent_per_worker(12_000_000, 3) == 16_000_000
    broadcast = TORCH_COLLECTIVES["torch_broadcast"]
    assert [broadcast.bytes_sent(3_000_000, 3, r) for r in range(3)] == [6_000_000, 0, 0]
    assert broadcast.bytes_sent_per_worker(3_000_000, 3) == 6_000_000
    # fp32: the tensor has whole elements
    assert allreduce.bytes_sent_per_worker(10, 2) == 12


def test_detection_does_not_import_torch_and_sees_it_hidden():
    code = ("import sys; from mn_harness.worker.torch_collectives import torch_importable; "
            "a = torch_importable(); sys.modules['torch'] = None; b = torch_importable(); "
            "print(a, b, 'torch' in sys.modules and sys.modules['torch'] is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    importable, hidden, imported = out.stdout.split()
    assert hidden == "False" and imported == "False"
    assert importable in ("True", "False")
