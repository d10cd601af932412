import os
import platform

from mn_harness import __version__, provenance


def test_collect_records_software_machine_command_and_times():
    p = provenance.collect(bpf_cc=True, dataplane="linux", argv=["mn-harness", "run", "a b.yaml"])
    assert p["software"]["mn_harness"] == __version__
    assert p["software"]["python"] == platform.python_version()
    assert "clang" in p["software"] and "bmv2" not in p["software"]
    assert p["machine"]["kernel"] == os.uname().release and p["machine"]["cpu_count"] == os.cpu_count()
    assert p["command"] == "mn-harness run 'a b.yaml'" and p["ended_at"] is None
    assert provenance.finish(p)["ended_at"] >= p["started_at"]


def test_the_checkout_commit_is_recorded():
    git = provenance.git_commit()
    assert git is not None and len(git["commit"]) == 40 and isinstance(git["dirty"], bool)


def test_the_p4_tools_only_for_the_bmv2_data_plane():
    p = provenance.collect(bpf_cc=False, dataplane="bmv2", argv=[])
    assert {"bmv2", "p4c"} <= set(p["software"]) and "clang" not in p["software"]
