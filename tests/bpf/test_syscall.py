"""The bpf(2) wrapper's pieces that need no kernel object (the map reads themselves run in the
egress-program tests, tests/dataplane/egress/test_program.py)."""

import pytest

from mn_harness.bpf.errors import BpfError
from mn_harness.bpf.syscall import BpfMap, cpu_count, prog_map_ids


@pytest.mark.parametrize("ranges,n", [("0", 1), ("0-1\n", 2), ("0-3,5", 6), ("0,2-7", 8)])
def test_possible_cpus(ranges, n):
    assert cpu_count(ranges) == n


@pytest.mark.root
def test_unknown_ids_are_one_line_errors():
    with pytest.raises(BpfError, match="^bpf command 13 failed: No such file or directory$"):
        prog_map_ids(2**31 - 7)
    with pytest.raises(BpfError, match="^bpf command 14 failed"):
        BpfMap(2**31 - 7)
