"""run.emulation.cpu_placement: which cores do the network's work and which the workers'.

`shared` (default): the kernel's scheduler puts everything anywhere, as on any Linux machine.
`split`: the workers run on every core but the first (`taskset`), and every interface of every
node steers its receive processing to the first core (RPS, `rps_cpus` = core 0), so forwarding
in the switches, the hosts' TCP receive path and the queues' dequeues that follow a receive run
on a core no worker competes for. A worker's own send path (its socket's transmit, its host's
egress queue) still runs on the worker's core: the kernel does it in the sender's context.

RPS is set through sysfs, which shows a namespace's interfaces only when mounted from inside it:
the command mounts the node's sysfs over /sys in a mount namespace of its own (`unshare -m`, as
`ip netns exec` does), so nothing is mounted anywhere else and it is gone when the command ends."""

from __future__ import annotations

import os
from collections.abc import Sequence

from mn_harness.errors import RunError
from mn_harness.network.commands import run_in

NETWORK_CORE = 0
# the interface names are arguments ($@), never part of the script
_RPS_SCRIPT = ('umount -l /sys; mount -t sysfs mn-harness-sysfs /sys && for i in "$@"; do '
               'echo "$0" > /sys/class/net/$i/queues/rx-0/rps_cpus || exit 1; done')


def worker_cores() -> list[int]:
    """The cores `split` gives the workers: every core this process may use but NETWORK_CORE."""
    cores = sorted(os.sched_getaffinity(0))
    if NETWORK_CORE not in cores or len(cores) < 2:
        raise RunError(f"run.emulation.cpu_placement: split needs core {NETWORK_CORE} and at least one "
                       f"more; this process may use cores {','.join(map(str, cores))}")
    return [c for c in cores if c != NETWORK_CORE]


def worker_prefix(placement: str) -> list[str]:
    """What a worker's command line starts with under `placement`."""
    if placement != "split":
        return []
    return ["taskset", "-c", ",".join(map(str, worker_cores()))]


def rps_argv(interfaces: Sequence[str]) -> list[str]:
    """One command that steers every one of `interfaces`' receive work to NETWORK_CORE."""
    mask = f"{1 << NETWORK_CORE:x}"
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", _RPS_SCRIPT, mask, *interfaces]


def steer_receive(pid: int, interfaces: Sequence[str]) -> None:
    if interfaces:
        run_in(pid, rps_argv(interfaces))
