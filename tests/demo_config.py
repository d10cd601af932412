"""The shipped demo experiment, shrunk for tests: same topology and jobs, small bytes."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def small_demo(iterations: int = 4, bytes_per_iteration: str = "2MB", compute: str = "60ms") -> dict:
    raw = yaml.safe_load((ROOT / "topologies/dumbbell-2jobs.yaml").read_text())
    for job in raw["jobs"]:
        job.update(bytes_per_iteration=bytes_per_iteration, compute=compute, iterations=iterations)
    raw["run"]["dataplane"] = "linux"
    return raw
