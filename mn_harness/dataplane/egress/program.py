"""One port's egress program: attach it (tc, inside the node's namespace), reach its maps, fill
its job table, read its counters, detach it.

The program is loaded by `tc filter ... bpf obj` itself (iproute2 with libbpf), so it lives on
the interface: it goes away with the filter, or with the namespace when a run crashes, and
nothing is pinned in the root namespace. The harness finds the program's id with `tc -j filter
show` and opens its maps by id (mn_harness/bpf/syscall.py); the open map fds are the harness's
only references, closed in `detach`."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from pathlib import Path

from mn_harness.bpf.errors import BpfError
from mn_harness.bpf.syscall import BpfMap, prog_map_ids
from mn_harness.dataplane.egress.build import PROGRAM_NAME, SECTION
from mn_harness.dataplane.egress.counters import Counters, counters_size
from mn_harness.dataplane.errors import DataplaneError
from mn_harness.network.commands import run_in
from mn_harness.network.errors import NetworkError
from mn_harness.network.shaping import bpf_detach_commands, bpf_egress_argv, clsact_commands

MAP_NAMES = ("mnh_cnt", "mnh_ctl", "mnh_jobs")
_ZERO_KEY = struct.pack("<I", 0)


def attached_prog_id(tc_json: str) -> int | None:
    """The id of the BPF program in `tc -j filter show dev X egress` output, if any."""
    for entry in json.loads(tc_json or "[]"):
        prog = entry.get("options", {}).get("prog", {})
        if "id" in prog:
            return int(prog["id"])
    return None


class EgressProgram:
    """The egress program on `intf` in the namespace of `pid` (None: the root namespace)."""

    def __init__(self, pid: int | None, intf: str, obj: Path, jobs: int, where: str = ""):
        self.pid = pid
        self.intf = intf
        self.obj = Path(obj)
        self.jobs = max(1, jobs)
        self.where = where or intf
        self.prog_id: int | None = None
        self.maps: dict[str, BpfMap] = {}
        self.epoch = 0
        self._read: Callable[[], bytes] | None = None
        self._set_epoch: Callable[[bytes], None] | None = None

    def attach(self) -> None:
        """clsact + the filter; DataplaneError (one line) when the kernel or tc refuse."""
        try:
            for argv in clsact_commands(self.intf):
                run_in(self.pid, argv)
            run_in(self.pid, bpf_egress_argv(self.intf, str(self.obj), SECTION))
            shown = run_in(self.pid, ["tc", "-j", "filter", "show", "dev", self.intf, "egress"])
        except NetworkError as exc:
            raise DataplaneError(f"{self.where}: could not attach the ECN/queue program: {exc}") from None
        self.prog_id = attached_prog_id(shown)
        if self.prog_id is None:
            raise DataplaneError(f"{self.where}: tc shows no BPF program on {self.intf} egress")
        try:
            name, ids = prog_map_ids(self.prog_id)
            if name != PROGRAM_NAME:
                raise DataplaneError(f"{self.where}: program {self.prog_id} is {name!r}, not {PROGRAM_NAME}")
            for map_id in ids:
                m = BpfMap(map_id)
                if m.info.name in MAP_NAMES:
                    self.maps[m.info.name] = m
                else:
                    m.close()
        except BpfError as exc:
            raise DataplaneError(f"{self.where}: cannot open the program's maps: {exc}") from None
        missing = [n for n in MAP_NAMES if n not in self.maps]
        if missing or self.maps["mnh_cnt"].info.value_size != counters_size(self.jobs):
            self.close_maps()
            raise DataplaneError(f"{self.where}: the program's maps do not match this harness "
                                 f"(missing {missing or 'none'}; rebuild the cache)")

    def set_jobs(self, host_jobs: dict[str, int]) -> None:
        """IPv4 address -> job id: bytes and marks of a packet go to the job of its source (or,
        if that is no job host, its destination)."""
        jobs = self.maps["mnh_jobs"]
        for ip, job in host_jobs.items():
            jobs.update(socket.inet_aton(ip), struct.pack("<I", job))

    def read(self) -> Counters:
        """Close the current epoch and read the counters (epoch `self.epoch - 1` is the one
        just closed: its maximum is the interval's)."""
        if self._read is None:
            self._read = self.maps["mnh_cnt"].reader(_ZERO_KEY)
            self._set_epoch = self.maps["mnh_ctl"].writer(_ZERO_KEY, 8)
        self.epoch += 1
        assert self._set_epoch is not None
        try:
            self._set_epoch(struct.pack("<Q", self.epoch))
            raw = self._read()
        except BpfError as exc:
            raise DataplaneError(f"{self.where}: reading the queue counters failed: {exc}") from None
        cnt = self.maps["mnh_cnt"]
        return Counters.decode(raw, cnt.ncpus, cnt.stride, self.jobs)

    def close_maps(self) -> None:
        for m in self.maps.values():
            m.close()
        self.maps.clear()
        self._read = self._set_epoch = None

    def detach(self) -> None:
        """Remove filter and clsact (best effort: a vanished namespace took them already)."""
        self.close_maps()
        for argv in bpf_detach_commands(self.intf):
            try:
                run_in(self.pid, argv, check=False)
            except NetworkError:
                pass
        self.prog_id = None

    def state(self) -> dict:
        """For the run-state file: where the program was and its id (it dies with the namespace)."""
        return {"pid": self.pid, "intf": self.intf, "prog_id": self.prog_id}
