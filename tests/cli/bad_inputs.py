"""A corpus of bad inputs for the CLI: experiment files, arguments, results folders, comparison
folders and state directories, each with the name (file, YAML path or option) its one-line error
must contain. Used by tests/cli/test_bad_input.py, which runs each one without root.

A case is built inside a fresh, world-readable directory (the CLI runs as user nobody): `make`
writes what the case needs there and returns the command line and the name to expect."""

from __future__ import annotations

import copy
import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# A small valid experiment: every file case is this with one thing broken.
BASE: dict = {
    "experiment": "corpus",
    "hosts": ["h1", "h2", "h3", "h4"],
    "switches": ["s1", "s2"],
    "link_defaults": {"bw": "100Mbit", "queue": 100},
    "links": [{"endpoints": ["h1", "s1"]}, {"endpoints": ["h2", "s1"]},
              {"endpoints": ["s1", "s2"]}, {"endpoints": ["s2", "h3"]}, {"endpoints": ["s2", "h4"]}],
    "jobs": [{"name": "job1", "workers": ["h1", "h3"], "bytes_per_iteration": "1MB",
              "compute": "10ms", "iterations": 3},
             {"name": "job2", "workers": ["h2", "h4"], "bytes_per_iteration": "1MB",
              "compute": "10ms", "iterations": 3, "start_offset": "5ms"}],
    "run": {"dataplane": "linux"},
}
BASE_TEXT = yaml.safe_dump(BASE, sort_keys=False)


@dataclass
class Case:
    id: str
    make: Callable[[Path], tuple[list[str], str]]  # workdir -> (argv after mn-harness, expected name)
    env: dict[str, str] = field(default_factory=dict)
    stdout_closed: bool = False  # run with stdout already closed by its reader (`| head -1`)


CASES: list[Case] = []


def case(id: str, make, **kw) -> None:
    CASES.append(Case(id, make, **kw))


def write(d: Path, name: str, data: str | bytes) -> Path:
    path = d / name
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    path.chmod(0o644)
    return path


def mutated(fn: Callable[[dict], object]) -> str:
    raw = copy.deepcopy(BASE)
    fn(raw)
    return yaml.safe_dump(raw, sort_keys=False)


def setter(where: str, value) -> Callable[[dict], None]:
    """`jobs[0].compute` style path -> a function setting it (None deletes the key)."""
    def apply(raw: dict) -> None:
        node = raw
        parts = where.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        last = parts[-1]
        if value is _DELETE:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return apply


_DELETE = object()

# ---------------------------------------------------------------------------------------------
# Experiment files: (id, file contents, expected name; None = the file's own name). Each one
# is given to validate, run and compare.

FILES: list[tuple[str, str | bytes | Callable[[], str | bytes], str | None]] = []


def bad_file(id: str, data, expect: str | None = None) -> None:
    FILES.append((id, data, expect))


def bad_value(id: str, where: str, value, expect: str | None = None) -> None:
    bad_file(id, lambda: mutated(setter(where, value)), expect or where)


def bad_yaml(id: str, where: str, yaml_value: str, expect: str | None = None) -> None:
    """`where` set to a value written as YAML text (for .nan, 1.0e+400, tags ...)."""
    marker = "__VALUE__"

    def text() -> str:
        return mutated(setter(where, marker)).replace(f"'{marker}'", yaml_value).replace(marker, yaml_value)
    bad_file(id, text, expect or where)


# encodings, binary, YAML syntax, the top level
bad_file("empty", "")
bad_file("comments-only", "# nothing here\n")
bad_file("null-document", "~\n")
bad_file("top-list", "- hosts\n- links\n")
bad_file("top-string", "just words\n")
bad_file("top-int", "42\n")
bad_file("top-float-nan", ".nan\n")
bad_file("utf16-le-bom", b"\xff\xfe" + BASE_TEXT.encode("utf-16-le"))
bad_file("utf16-be-bom", b"\xfe\xff" + BASE_TEXT.encode("utf-16-be"))
bad_file("utf16-no-bom", BASE_TEXT.encode("utf-16-le"))
bad_file("utf32-bom", BASE_TEXT.encode("utf-32"))
bad_file("latin1", BASE_TEXT.replace("corpus", "corpusé").encode("latin-1"))
bad_file("bad-continuation", b"experiment: x\xc3\x28\n")
bad_file("overlong-utf8", b"experiment: \xc0\xaf\n")
bad_file("utf8-surrogate", b"experiment: \xed\xa0\x80\n")
bad_file("png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01")
bad_file("elf", b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0")
bad_file("gzip", b"\x1f\x8b\x08\0\0\0\0\0\0\x03\xcb\x48\xcd\xc9\xc9\x07\0")
bad_file("nul-in-text", BASE_TEXT[:40] + "\0" + BASE_TEXT[40:])
bad_file("too-large", lambda: BASE_TEXT + "#" * (1 << 20))
bad_file("long-line", lambda: "description: " + "x" * (1 << 20) + "\n")
bad_file("syntax-unclosed-bracket", "hosts: [h1, h2\nlinks: []\n")
bad_file("syntax-unclosed-quote", "experiment: 'corpus\nhosts: [h1]\n")
bad_file("syntax-tab-indent", "run:\n\tseed: 1\n")
bad_file("syntax-bad-indent", "run:\n  seed: 1\n dataplane: linux\n")
bad_file("syntax-colon-in-flow", "hosts: [a: b: c]\n")
bad_file("two-documents", BASE_TEXT + "---\n" + BASE_TEXT)
bad_file("undefined-alias", "hosts: *nope\n")
bad_file("alias-bomb", "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]) + "\n")
bad_file("deep-list", "hosts: " + "[" * 10000 + "]" * 10000 + "\n")
bad_file("deep-map", "hosts: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
bad_file("python-tag", "hosts: !!python/object/apply:os.system ['true']\n")
bad_file("unknown-tag", "hosts: !nosuchtag [h1]\n")
bad_file("binary-tag", "hosts: !!binary '%%%'\n", "jobs")
bad_file("bad-timestamp", "experiment: !!timestamp 2020-13-45\n")
bad_file("huge-int", "hosts: [h1]\nrun: {seed: " + "9" * 5000 + "}\n")
bad_file("unhashable-key", "? [a, b]\n: 1\n")
bad_file("duplicate-top-key", BASE_TEXT + "jobs: []\n")
bad_file("duplicate-nested-key", BASE_TEXT.replace("dataplane: linux", "dataplane: linux\n  dataplane: bmv2"))
bad_file("duplicate-job-key", BASE_TEXT.replace("  compute: 10ms\n", "  compute: 10ms\n  compute: 20ms\n", 1))
bad_file("duplicate-flow-key", "hosts: [h1]\nlink_defaults: {bw: 1Gbit, bw: 2Gbit}\n")
bad_file("merge-key-dup", "a: &a {x: 1}\nb: {<<: *a, x: 2, x: 3}\n")

# keys echoed from input: repr(), never raw
bad_file("key-newline", BASE_TEXT + '"hosts\\nmn-harness: ok": 1\n', "'hosts\\nmn-harness: ok'")
bad_file("key-ansi", BASE_TEXT + '"\\e[31mred\\e[0m": 1\n', "'\\x1b[31mred\\x1b[0m'")
bad_file("key-nul", BASE_TEXT + '"a\\0b": 1\n', "'a\\x00b'")
bad_file("key-space", BASE_TEXT + '"two words": 1\n', "'two words'")
bad_file("key-int", BASE_TEXT + "7: x\n", "7")
bad_file("key-null", BASE_TEXT + "~: x\n", "None")
bad_file("key-bool", BASE_TEXT + "true: x\n", "True")
bad_file("job-key-newline", lambda: mutated(lambda r: r["jobs"][0].update({"a\nb": 1})), "jobs[0].'a\\nb'")
bad_file("run-key-ansi", lambda: mutated(lambda r: r["run"].update({"\x1b[2J": 1})), "run.'\\x1b[2J'")
bad_value("unknown-top-key", "hostz", ["h1"])
bad_value("unknown-job-key", "jobs[1].computee", "1ms")
bad_value("unknown-link-key", "links[2].bandwidth", "1Gbit")
bad_value("unknown-run-key", "run.dataplanes", "linux")
bad_value("unknown-defaults-key", "link_defaults.rate", "1Gbit")
bad_value("unknown-cc-key", "jobs[0].cc", {"name": "mltcp-reno", "slop": 1}, "jobs[0].cc.slop")
bad_value("unknown-inc-key", "jobs[0].inc", {"slot": 1}, "jobs[0].inc")
bad_value("unknown-switch-key", "switches[0]", {"name": "s1", "programme": "x"}, "switches[0].programme")

# required keys, types of the top-level sections
for key in ("hosts", "links", "jobs"):
    bad_value(f"missing-{key}", key, _DELETE)
bad_value("hosts-string", "hosts", "h1 h2")
bad_value("hosts-mapping", "hosts", {"h1": 1})
bad_value("hosts-empty", "hosts", [])
bad_value("links-string", "links", "h1-s1")
bad_value("jobs-string", "jobs", "job1")
bad_value("jobs-mapping", "jobs", {"name": "job1"})
bad_value("jobs-empty", "jobs", [])
bad_value("run-string", "run", "linux")
bad_value("run-list", "run", ["linux"])
bad_value("switches-string", "switches", "s1")
bad_value("link-defaults-list", "link_defaults", [1])
bad_value("experiment-int", "experiment", 5)
bad_value("experiment-slash", "experiment", "../../etc")
bad_value("experiment-newline", "experiment", "a\nb")
bad_value("description-list", "description", ["x"])

# names
bad_value("host-int", "hosts[0]", 1)
bad_value("host-null", "hosts[0]", None)
bad_value("host-dash", "hosts[0]", "h-1")
bad_value("host-too-long", "hosts[0]", "abcdefghij")
bad_value("host-newline", "hosts[0]", "h\n1")
bad_value("host-duplicate", "hosts[1]", "h1")
bad_value("host-is-switch-name", "hosts[0]", "s1")
bad_value("switch-bad-name", "switches[0]", "1s")
bad_value("job-bad-name", "jobs[0].name", "job 1")
bad_value("job-duplicate-name", "jobs[1].name", "job1")

# links
bad_value("endpoints-three", "links[0].endpoints", ["h1", "s1", "s2"])
bad_value("endpoints-string", "links[0].endpoints", "h1,s1")
bad_value("endpoints-self", "links[2].endpoints", ["s1", "s1"])
bad_value("endpoints-unknown", "links[2].endpoints", ["s1", "s9"], "links[2].endpoints[1]")
bad_value("link-duplicate", "links[3].endpoints", ["s1", "h1"], "links[3]")
bad_value("link-host-host", "links[2].endpoints", ["h1", "h2"], "links[2]")
bad_value("link-not-mapping", "links[0]", "h1-s1")
bad_value("bw-missing", "link_defaults.bw", _DELETE, "links[0].bw")
bad_yaml("bw-nan", "links[2].bw", ".nan")
bad_yaml("bw-inf", "links[2].bw", ".inf")
bad_yaml("bw-minus-inf", "links[2].bw", "-.inf")
bad_yaml("bw-1e400-float", "links[2].bw", "1.0e+400")
bad_value("bw-1e400-string", "links[2].bw", "1e400bit")
bad_value("bw-nan-string", "links[2].bw", "nanbit")
bad_value("bw-zero", "links[2].bw", 0)
bad_value("bw-negative", "links[2].bw", "-1Gbit")
bad_value("bw-half-bit", "links[2].bw", "0.5bit")
bad_value("bw-below-htb", "links[2].bw", "100bit")
bad_value("bw-above-max", "links[2].bw", "40Tbit")
bad_value("bw-burst-above-u32", "links[2].bw", "4.4TBps")  # 1 ms of burst = 4.4 GB > 2^32 bytes
bad_value("bw-kbps-lower", "links[2].bw", "800kbps")
bad_value("bw-word", "links[2].bw", "fast")
bad_value("bw-mbps-lower", "links[2].bw", "100mbps")
bad_value("bw-gbyte", "links[2].bw", "1 Gbyte")
bad_value("bw-bool", "links[2].bw", True)
bad_value("bw-list", "links[2].bw", [1])
bad_value("bw-null", "links[2].bw", None)
bad_value("queue-zero", "links[2].queue", 0)
bad_value("queue-negative", "links[2].queue", -5)
bad_value("queue-float", "links[2].queue", 1.5)
bad_value("queue-string", "links[2].queue", "100")
bad_value("queue-bool", "links[2].queue", True)
bad_value("queue-above-u32", "links[2].queue", 2_836_835)  # x 1514 bytes > 2^32
bad_yaml("queue-nan", "links[2].queue", ".nan")
bad_value("queue-huge", "link_defaults.queue", 10**30, "links[0].queue")
bad_value("delay-negative", "links[2].delay", "-1ms")
bad_yaml("delay-nan", "links[2].delay", ".nan")
bad_yaml("delay-inf", "links[2].delay", ".inf")
bad_value("delay-1e400", "links[2].delay", "1e400s")
bad_value("delay-unit", "links[2].delay", "5 parsecs")
bad_value("delay-caps", "links[2].delay", "5MS")
bad_value("delay-too-long", "links[2].delay", "1h")

# jobs
bad_value("job-string", "jobs[0]", "job1")
for key in ("name", "workers", "compute", "iterations"):
    bad_value(f"job-missing-{key}", f"jobs[0].{key}", _DELETE)
bad_value("workers-one", "jobs[0].workers", ["h1"])
bad_value("workers-string", "jobs[0].workers", "h1,h3")
bad_value("workers-twice", "jobs[0].workers", ["h1", "h1"], "jobs[0].workers[1]")
bad_value("worker-switch", "jobs[0].workers", ["h1", "s1"], "jobs[0].workers[1]")
bad_value("worker-unknown", "jobs[1].workers", ["h2", "h9"], "jobs[1].workers[1]")
bad_value("worker-two-jobs", "jobs[1].workers", ["h2", "h1"], "jobs[1].workers[1]")
bad_value("collective-unknown", "jobs[0].collective", "hierarchical_allreduce")
bad_value("bytes-and-params", "jobs[0].model_params", "1M", "jobs[0].bytes_per_iteration")
bad_value("bytes-neither", "jobs[0].bytes_per_iteration", _DELETE)
bad_value("bytes-zero", "jobs[0].bytes_per_iteration", 0)
bad_value("bytes-round-to-zero", "jobs[0].bytes_per_iteration", "0.4B")
bad_value("bytes-tiny-kb", "jobs[0].bytes_per_iteration", "0.0001KB")
bad_yaml("bytes-nan", "jobs[0].bytes_per_iteration", ".nan")
bad_yaml("bytes-inf", "jobs[0].bytes_per_iteration", ".inf")
bad_value("bytes-1e400", "jobs[0].bytes_per_iteration", "1e400B")
bad_value("bytes-bits", "jobs[0].bytes_per_iteration", "25Mb")
bad_value("bytes-lower-mb", "jobs[0].bytes_per_iteration", "25mb")
bad_value("bytes-kilobits", "jobs[0].bytes_per_iteration", "200kbit")
bad_value("bytes-lower-kib", "jobs[0].bytes_per_iteration", "4kib")
bad_value("bytes-negative", "jobs[0].bytes_per_iteration", -5)
bad_value("bytes-list", "jobs[0].bytes_per_iteration", [1])
bad_value("bytes-above-max", "jobs[0].bytes_per_iteration", "2TB")
bad_value("params-zero", "jobs[1].model_params", 0, "jobs[1].bytes_per_iteration")
bad_file("params-nan", lambda: mutated(lambda r: (r["jobs"][0].pop("bytes_per_iteration"),
                                                   r["jobs"][0].update(model_params=float("nan")))),
         "jobs[0].model_params")
bad_file("params-1e400", lambda: mutated(lambda r: (r["jobs"][0].pop("bytes_per_iteration"),
                                                     r["jobs"][0].update(model_params="1e400"))),
         "jobs[0].model_params")
bad_file("params-above-max", lambda: mutated(lambda r: (r["jobs"][0].pop("bytes_per_iteration"),
                                                         r["jobs"][0].update(model_params="1T"))),
         "jobs[0].model_params")
bad_yaml("compute-nan", "jobs[0].compute", ".nan")
bad_yaml("compute-inf", "jobs[0].compute", ".inf")
bad_value("compute-negative", "jobs[0].compute", "-10ms")
bad_value("compute-1e400", "jobs[0].compute", "1e400s")
bad_value("compute-too-long", "jobs[0].compute", "2h")
bad_value("compute-bool", "jobs[0].compute", False)
bad_value("iterations-zero", "jobs[0].iterations", 0)
bad_value("iterations-negative", "jobs[0].iterations", -3)
bad_value("iterations-float", "jobs[0].iterations", 2.5)
bad_value("iterations-string", "jobs[0].iterations", "10")
bad_value("iterations-bool", "jobs[0].iterations", True)
bad_value("iterations-1e12", "jobs[0].iterations", 10**12)
bad_yaml("iterations-inf", "jobs[0].iterations", ".inf")
bad_yaml("offset-nan", "jobs[1].start_offset", ".nan")
bad_yaml("offset-inf", "jobs[1].start_offset", ".inf")
bad_value("offset-negative", "jobs[1].start_offset", "-5ms")
bad_value("offset-9e9", "jobs[1].start_offset", 9.3e9)
bad_value("offset-1e400", "jobs[1].start_offset", "1e400s")
bad_value("cc-unknown", "jobs[0].cc", "warp-speed")
bad_value("cc-int", "jobs[0].cc", 5)
bad_value("cc-list", "jobs[0].cc", ["reno"])
bad_value("cc-no-name", "jobs[0].cc", {"slope": 1}, "jobs[0].cc.name")
bad_value("cc-kernel-slope", "jobs[0].cc", {"name": "reno", "slope": 1}, "jobs[0].cc.slope")
bad_value("cc-slope-nan", "jobs[0].cc", {"name": "mltcp-reno", "slope": float("nan")}, "jobs[0].cc.slope")
bad_value("cc-slope-inf", "jobs[0].cc", {"name": "mltcp-reno", "slope": float("inf")}, "jobs[0].cc.slope")
bad_value("cc-slope-range", "jobs[0].cc", {"name": "mltcp-reno", "slope": 100}, "jobs[0].cc.slope")
bad_value("cc-intercept-zero", "jobs[0].cc", {"name": "mltcp-reno", "intercept": 0}, "jobs[0].cc.intercept")
bad_value("cc-idle-gap-nan", "jobs[0].cc", {"name": "mltcp-reno", "idle_gap": float("nan")}, "jobs[0].cc.idle_gap")
bad_value("cc-idle-gap-long", "jobs[0].cc", {"name": "mltcp-reno", "idle_gap": "20s"}, "jobs[0].cc.idle_gap")
bad_value("cc-name-newline", "jobs[0].cc", "reno\nmn-harness: ok")
bad_value("inc-on-ring", "jobs[0].inc", {"slots": 4})
bad_file("inc-on-linux", lambda: mutated(lambda r: r["jobs"][0].update(collective="inc_allreduce")),
         "jobs[0].collective")

# switches and the P4 limits
bad_value("program-misspelt", "switches[0]", {"name": "s1", "program": "ecn_telemtry"}, "switches[0].program")
bad_value("program-not-p4", "switches[0]", {"name": "s1", "program": "/etc/passwd"}, "switches[0].program")
bad_value("program-int", "switches[0]", {"name": "s1", "program": 5}, "switches[0].program")
bad_value("ecn-threshold-zero", "switches[0]", {"name": "s1", "ecn_threshold": 0}, "switches[0].ecn_threshold")
bad_value("ecn-threshold-2^19", "switches[0]", {"name": "s1", "ecn_threshold": 2**19}, "switches[0].ecn_threshold")


def _star(n_hosts: int, switch: str = "s1", dataplane: str = "linux", **job) -> dict:
    hosts = [f"h{i}" for i in range(n_hosts)]
    return {"hosts": hosts, "switches": [switch], "link_defaults": {"bw": "10Mbit"},
            "links": [{"endpoints": [h, switch]} for h in hosts],
            "jobs": [{"name": "j", "workers": hosts[:2], "bytes_per_iteration": "1MB",
                      "compute": "10ms", "iterations": 1, **job}],
            "run": {"dataplane": dataplane}}


bad_file("switch-100-ports", lambda: yaml.safe_dump(_star(100, switch="abcdefghi")), "switches[0]")
bad_file("bmv2-33-ports", lambda: yaml.safe_dump(_star(33, dataplane="bmv2")), "switches[0]")
bad_file("too-many-nodes", lambda: yaml.safe_dump(_star(1100)), "hosts")
bad_file("agg-33-workers", lambda: yaml.safe_dump(
    {**_star(33, dataplane="bmv2"), "switches": [{"name": "s1", "program": "aggregation"}],
     "jobs": [{"name": "j", "workers": [f"h{i}" for i in range(33)], "collective": "inc_allreduce",
               "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 1}]}),
    "jobs[0].workers")
bad_file("agg-slots-pool", lambda: yaml.safe_dump(
    {**_star(4, dataplane="bmv2"), "switches": [{"name": "s1", "program": "aggregation"}],
     "jobs": [{"name": f"j{k}", "workers": [f"h{2 * k}", f"h{2 * k + 1}"], "collective": "inc_allreduce",
               "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 1, "inc": {"slots": 600}}
              for k in range(2)]}),
    "jobs[1].inc.slots")
bad_file("inc-slots-zero", lambda: yaml.safe_dump(
    {**_star(2, dataplane="bmv2"), "switches": [{"name": "s1", "program": "aggregation"}],
     "jobs": [{"name": "j", "workers": ["h0", "h1"], "collective": "inc_allreduce",
               "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 1, "inc": {"slots": 0}}]}),
    "jobs[0].inc.slots")
bad_file("inc-scale-nan", lambda: yaml.safe_dump(
    {**_star(2, dataplane="bmv2"), "switches": [{"name": "s1", "program": "aggregation"}],
     "jobs": [{"name": "j", "workers": ["h0", "h1"], "collective": "inc_allreduce",
               "bytes_per_iteration": "64KB", "compute": "10ms", "iterations": 1,
               "inc": {"scale": float("nan")}}]}),
    "jobs[0].inc.scale")
bad_file("bmv2-queue-above-19-bits", lambda: yaml.safe_dump(
    {**_star(2, dataplane="bmv2"), "link_defaults": {"bw": "10Mbit", "queue": 2**19}}), "links[0].queue")
bad_file("bmv2-rate-below-one-frame", lambda: yaml.safe_dump(
    {**_star(2, dataplane="bmv2"), "link_defaults": {"bw": "5kbit"}}), "links[0].bw")
bad_file("disconnected", lambda: mutated(lambda r: r["links"].__setitem__(2, {"endpoints": ["s2", "h3"]})
                                         or r["links"].pop(3)), "links")

# run options
bad_value("dataplane-ovs", "run.dataplane", "ovs")
bad_value("seed-string", "run.seed", "one")
bad_value("seed-float", "run.seed", 1.5)
bad_value("seed-bool", "run.seed", True)
bad_value("seed-huge", "run.seed", 2**70)
bad_value("output-dir-int", "run.output_dir", 5)
bad_value("output-dir-empty", "run.output_dir", "")
bad_value("ssai-string", "run.slow_start_after_idle", "yes")
bad_value("isolated-int", "run.isolated", 1)
bad_value("timeout-zero", "run.timeout", 0)
bad_value("timeout-negative", "run.timeout", "-1s")
bad_yaml("timeout-nan", "run.timeout", ".nan")
bad_value("timeout-too-long", "run.timeout", "30d")
bad_value("timeout-1e400", "run.timeout", "1e400s")
bad_value("bin-zero", "run.throughput_bin", 0)
bad_yaml("bin-nan", "run.throughput_bin", ".nan")
bad_value("bin-too-small", "run.throughput_bin", "1us")
bad_value("bin-too-large", "run.throughput_bin", "2min")
bad_value("gso-zero", "run.gso_max_segs", 0)
bad_value("gso-65536", "run.gso_max_segs", 65536)
bad_value("gso-string", "run.gso_max_segs", "16")
bad_value("gso-float", "run.gso_max_segs", 1.5)
bad_value("emulation-string", "run.emulation", "mininet")
bad_value("emulation-unknown-key", "run.emulation.switch", "bridge")
bad_value("emulation-switches", "run.emulation.switches", "ovs")
bad_value("emulation-access", "run.emulation.access_links", False)
bad_value("emulation-host-queue", "run.emulation.host_queue", 1000)
bad_value("emulation-queue-limit", "run.emulation.queue_limit", "frames")
bad_value("emulation-burst-bare", "run.emulation.htb_burst", 15000)
bad_value("emulation-burst-bits", "run.emulation.htb_burst", "15Kb")
bad_value("emulation-cburst-long", "run.emulation.htb_cburst", "5s")
bad_value("emulation-quantum", "run.emulation.htb_quantum", "8GB")
bad_value("emulation-time-scale-below-1", "run.emulation.time_scale", 0.5)
bad_value("emulation-time-scale-string", "run.emulation.time_scale", "5x")
bad_value("emulation-cpu", "run.emulation.cpu_placement", "pinned")
bad_value("emulation-main-thread", "run.emulation.worker_main_thread", "fifo")
bad_file("emulation-bridge-ecmp", lambda: mutated(lambda raw: (setter("run.emulation.switches", "bridge")(raw),
                                                                 setter("routing", "ecmp")(raw))),
         "run.emulation.switches")
bad_value("fidelity-string", "run.fidelity", "yes")
bad_value("fidelity-unknown", "run.fidelity", {"link_width": 0.9}, "run.fidelity.link_width")
bad_value("fidelity-share", "run.fidelity", {"link_within": 95}, "run.fidelity.link_within")
bad_value("fidelity-gaps", "run.fidelity", {"link_min_gaps": -1}, "run.fidelity.link_min_gaps")
bad_value("fidelity-lag", "run.fidelity", {"send_lag": "fast"}, "run.fidelity.send_lag")
bad_value("shifts-unknown", "run.shifts", "cassiny")
bad_value("shifts-on", "run.shifts", True)
bad_value("shifts-no-schedule", "run.shifts", {"drift": 0.1}, "run.shifts.schedule")
bad_value("shifts-drift", "run.shifts", {"schedule": "cassini", "drift": 2}, "run.shifts.drift")
bad_value("shifts-key", "run.shifts", {"schedule": "cassini", "threshold": 0.1}, "run.shifts.threshold")
bad_value("fidelity-clock", "run.fidelity", {"clock_error": 2}, "run.fidelity.clock_error")

# `servers:` (docs/cluster.md)
_SERVERS = [{"name": "a", "address": "192.0.2.1"}, {"name": "b", "address": "192.0.2.2"}]
bad_value("servers-string", "servers", "a,b")
bad_value("servers-empty", "servers", [])
bad_value("servers-no-address", "servers", [{"name": "a"}], "servers[0].address")
bad_value("servers-address-option", "servers", [{"name": "a", "address": "-oProxyCommand=sh"}],
          "servers[0].address")
bad_value("servers-address-space", "servers", [{"name": "a", "address": "a b"}], "servers[0].address")
bad_value("servers-bad-name", "servers", [{"name": "1a", "address": "192.0.2.1"}], "servers[0].name")
bad_value("servers-port", "servers", [{"name": "a", "address": "192.0.2.1", "port": 70000}], "servers[0].port")
bad_value("servers-user", "servers", [{"name": "a", "address": "192.0.2.1", "user": "root;sh"}],
          "servers[0].user")
bad_value("servers-python-relative", "servers", [{"name": "a", "address": "192.0.2.1", "python": "python3"}],
          "servers[0].python")
bad_value("servers-unknown-key", "servers", [{"name": "a", "address": "192.0.2.1", "ssh": "x"}],
          "servers[0].ssh")
bad_value("servers-unknown-node", "servers", [{"name": "a", "address": "192.0.2.1", "nodes": ["s9"]}],
          "servers[0].nodes[0]")
bad_value("servers-node-twice", "servers", [{"name": "a", "address": "192.0.2.1", "nodes": ["s1"]},
                                            {"name": "b", "address": "192.0.2.2", "nodes": ["s1"]}],
          "servers[1].nodes[0]")
bad_value("servers-duplicate", "servers", [*_SERVERS, {"name": "a", "address": "192.0.2.3"}], "servers[2].name")
bad_value("servers-same-address", "servers", [{"name": "a", "address": "192.0.2.1"},
                                              {"name": "b", "address": "192.0.2.1"}], "servers[1].address")
bad_value("servers-idle", "servers", [{"name": "a", "address": "192.0.2.1",
                                       "nodes": ["h1", "h2", "h3", "h4", "s1", "s2"]},
                                      {"name": "b", "address": "192.0.2.2"}], "servers[1]")


def _with_servers(**top) -> str:
    return mutated(lambda raw: raw.update({"servers": _SERVERS, **top}))


bad_file("servers-ecmp", lambda: _with_servers(routing="ecmp"), "routing")
bad_file("servers-bmv2", lambda: _with_servers(run={"dataplane": "bmv2"}), "run.dataplane")
bad_file("servers-isolated", lambda: _with_servers(run={"dataplane": "linux", "isolated": True}), "run.isolated")
bad_file("servers-shifts", lambda: _with_servers(run={"dataplane": "linux", "shifts": "cassini"}), "run.shifts")


def _file_case(command: str, id: str, data, expect: str | None) -> Case:
    def make(d: Path) -> tuple[list[str], str]:
        content = data() if callable(data) else data
        path = write(d, f"{id}.yaml", content)
        extra = ["--no-plots"] if command != "validate" else []
        return [command, str(path), *extra], expect if expect is not None else str(path)
    return Case(f"{command}:{id}", make)


# The iteration's other forms (phases, compute mappings, presets, stragglers, traces): the same
# finite-number checks and limits, whichever form says it.
SHORT_FORM = ("bytes_per_iteration", "compute", "collective")


def bad_form(id: str, form: dict, expect: str) -> None:
    """job1's iteration written as `form` instead of the short form."""
    def apply(raw: dict) -> None:
        job = raw["jobs"][0]
        for key in SHORT_FORM:
            job.pop(key, None)
        job.update(form)
    bad_file(id, lambda: mutated(apply), expect)


def _comm(nbytes, **kw) -> dict:
    return {"collective": "ring_allreduce", "bytes": nbytes, **kw}


bad_form("phases-not-list", {"phases": "compute then ring"}, "jobs[0].phases")
bad_form("phases-empty", {"phases": []}, "jobs[0].phases")
bad_form("phases-no-comm", {"phases": [{"compute": "10ms"}]}, "jobs[0].phases")
bad_form("phases-key-newline", {"phases": [{"compute": "1ms"}, _comm("1MB", **{"by\ntes": 1})]},
         "'by\\ntes'")
bad_form("phases-bytes-nan", {"phases": [_comm(float("nan"))]}, "jobs[0].phases[0].bytes")
bad_form("phases-bytes-inf", {"phases": [_comm("infMB")]}, "jobs[0].phases[0].bytes")
bad_form("phases-over-1TB", {"phases": [_comm("600GB"), _comm("600GB")]}, "jobs[0].phases")
bad_form("phases-compute-over-hour", {"phases": [{"compute": "2000s"}, _comm("1MB"), {"compute": "2000s"}]},
         "jobs[0].phases")
bad_form("phases-compute-1e400", {"phases": [{"compute": 1e400}, _comm("1MB")]}, "jobs[0].phases[0].compute")
bad_form("phases-waits-forward", {"phases": [{"compute": "1ms", "waits": [1]}, _comm("1MB")]},
         "jobs[0].phases[0].waits[0]")
bad_form("phases-too-many", {"phases": [_comm("1kB")] * 300}, "jobs[0].phases")
bad_form("phases-pipeline-forward-inf", {"phases": [_comm("1MB", collective="pipeline", micro_batches=2,
                                                         forward=float("inf"))]}, "jobs[0].phases[0].forward")
bad_form("compute-mean-nan", {"bytes_per_iteration": "1MB", "compute": {"mean": float("nan")}},
         "jobs[0].compute.mean")
bad_form("compute-jitter-inf", {"bytes_per_iteration": "1MB", "compute": {"mean": "10ms", "jitter": float("inf")}},
         "jobs[0].compute.jitter")
bad_form("compute-distribution-unknown", {"bytes_per_iteration": "1MB",
                                          "compute": {"mean": "10ms", "distribution": "cauchy"}},
         "jobs[0].compute.distribution")
bad_form("compute-mean-two-hours", {"bytes_per_iteration": "1MB", "compute": {"mean": "2h"}}, "jobs[0].compute")
bad_form("model-unknown", {"model": "gpt-17", "compute": "10ms"}, "jobs[0].model")
bad_form("model-and-bytes", {"model": "resnet50", "bytes_per_iteration": "1MB", "compute": "10ms"}, "jobs[0]")
bad_form("model-params-inf", {"model_params": float("inf"), "compute": "10ms"}, "jobs[0].model_params")
bad_form("model-params-5e11", {"model_params": "500G", "compute": "10ms"}, "jobs[0].model_params")
bad_form("scale-real-link-nan", {"bytes_per_iteration": "1MB", "compute": "10ms",
                                 "scale": {"real_link": float("nan")}}, "jobs[0].scale.real_link")
bad_form("overlap-on-ps", {"bytes_per_iteration": "1MB", "compute": "10ms", "collective": "parameter_server",
                           "overlap": {}}, "jobs[0]")
bad_form("trace-dev-zero", {"trace": "/dev/zero"}, "jobs[0].trace")
bad_form("trace-missing", {"trace": "nowhere.et"}, "jobs[0].trace")
bad_form("trace-directory", {"trace": "/tmp"}, "jobs[0].trace")
bad_form("trace-not-string", {"trace": 7}, "jobs[0].trace")
bad_value("straggler-delay-nan", "jobs[0].stragglers", [{"ranks": [0], "delay": float("nan")}],
          "jobs[0].stragglers[0].delay")
bad_value("straggler-delay-a-day", "jobs[0].stragglers", [{"ranks": [0], "delay": "1d"}],
          "jobs[0].stragglers[0].delay")
bad_value("straggler-rank-out-of-range", "jobs[0].stragglers", [{"ranks": [5], "slowdown": 2}],
          "jobs[0].stragglers[0].ranks[0]")
bad_value("straggler-slowdown-inf", "jobs[0].stragglers", [{"ranks": [0], "slowdown": float("inf")}],
          "jobs[0].stragglers[0].slowdown")
bad_value("servers-also-worker", "jobs[0].servers", ["h1"], "jobs[0].servers[0]")


def _trace_case(id: str, make_trace: Callable[[Path], None]) -> None:
    """A job whose trace (next to the experiment file) is a FIFO, a gzip bomb, garbage ..."""
    def make(d: Path) -> tuple[list[str], str]:
        make_trace(d / "t.et")
        raw = copy.deepcopy(BASE)
        for key in SHORT_FORM:
            raw["jobs"][0].pop(key, None)
        raw["jobs"][0]["trace"] = "t.et"
        return ["validate", str(write(d, "trace.yaml", yaml.safe_dump(raw)))], "jobs[0].trace"
    case(f"validate:{id}", make)


def _fifo_trace(path: Path) -> None:
    os.mkfifo(path)
    path.chmod(0o666)


def _gzip_bomb(path: Path) -> None:  # 128 KiB that inflate to 128 MiB
    write(path.parent, path.name, gzip.compress(b"\0" * (128 << 20), compresslevel=9))


_trace_case("trace-fifo", _fifo_trace)
_trace_case("trace-gzip-bomb", _gzip_bomb)
_trace_case("trace-garbage", lambda p: write(p.parent, p.name, b"\xff" * 64))
_trace_case("trace-truncated-gzip", lambda p: write(p.parent, p.name, gzip.compress(b"\x01" * 4096)[:40]))
_trace_case("trace-empty", lambda p: write(p.parent, p.name, b""))


# validate gets every file; run and compare read files through the same reader and validation
# but in their own code (compare parses the file for its sweep), so they get a sample of each kind.
SAMPLE = {"empty", "null-document", "top-list", "top-string", "top-int", "utf16-le-bom", "utf16-no-bom",
          "latin1", "png", "too-large", "syntax-unclosed-bracket", "two-documents", "alias-bomb", "deep-list",
          "python-tag", "bad-timestamp", "huge-int", "duplicate-top-key", "duplicate-job-key", "key-newline",
          "key-ansi", "key-int", "missing-jobs", "hosts-string", "jobs-string", "jobs-mapping", "jobs-empty",
          "run-string", "experiment-slash", "host-newline", "bw-nan", "bw-1e400-float", "bw-below-htb",
          "bw-above-max", "bw-mbps-lower", "queue-above-u32", "delay-inf", "job-string", "worker-unknown",
          "bytes-round-to-zero", "bytes-bits", "bytes-inf", "params-nan", "compute-nan", "iterations-1e12",
          "offset-9e9", "cc-unknown", "cc-slope-nan", "inc-on-linux", "program-misspelt", "switch-100-ports",
          "bmv2-33-ports", "agg-33-workers", "disconnected", "seed-huge", "timeout-too-long", "bin-too-small",
          "gso-65536"}
for _id, _data, _expect in FILES:
    for _command in ("validate", "run", "compare"):
        if _command == "validate" or _id in SAMPLE:
            CASES.append(_file_case(_command, _id, _data, _expect))


# ---------------------------------------------------------------------------------------------
# Files that are not files


def _special(target: str | Callable[[Path], Path], expect_self: bool = True):
    def make_for(command: str):
        def make(d: Path) -> tuple[list[str], str]:
            path = target(d) if callable(target) else Path(target)
            return [command, str(path)], str(path) if expect_self else ""
        return make
    return make_for


def _fifo(d: Path) -> Path:
    path = d / "pipe.yaml"
    os.mkfifo(path)
    path.chmod(0o666)
    return path


def _unreadable(d: Path) -> Path:
    path = write(d, "secret.yaml", BASE_TEXT)
    path.chmod(0o000)
    return path


def _loop(d: Path) -> Path:
    (d / "loop.yaml").symlink_to(d / "loop.yaml")
    return d / "loop.yaml"


def _dangling(d: Path) -> Path:
    (d / "dangling.yaml").symlink_to(d / "nowhere.yaml")
    return d / "dangling.yaml"


def _newline_name(d: Path) -> Path:
    return write(d, "bad\nname.yaml", "- not a mapping\n")


def _ansi_name(d: Path) -> Path:
    return write(d, "\x1b[31mred.yaml", "- not a mapping\n")


SPECIAL = {
    "fifo": _fifo, "dev-zero": "/dev/zero", "dev-null": "/dev/null", "dev-urandom": "/dev/urandom",
    "directory": lambda d: d, "missing": lambda d: d / "missing.yaml", "unreadable": _unreadable,
    "symlink-loop": _loop, "dangling-symlink": _dangling, "proc-self-fd": "/proc/self/fd/0",
    "name-too-long": lambda d: d / ("x" * 300 + ".yaml"),
    "under-a-file": lambda d: write(d, "plain", "x") / "sub.yaml",
}
for _command in ("validate", "run", "compare"):
    for _id, _target in SPECIAL.items():
        case(f"{_command}:{_id}", _special(_target)(_command))


def _named(command: str, maker, expect) -> Callable[[Path], tuple[list[str], str]]:
    def make(d: Path) -> tuple[list[str], str]:
        path = maker(d)
        return [command, str(path)], expect
    return make


for _command in ("validate", "run", "compare"):
    case(f"{_command}:file-name-newline", _named(_command, _newline_name, "'"))
    case(f"{_command}:file-name-ansi", _named(_command, _ansi_name, "\\x1b[31mred.yaml"))

# ---------------------------------------------------------------------------------------------
# Arguments


def argv_case(id: str, argv: list[str], expect: str, **kw) -> None:
    def make(d: Path) -> tuple[list[str], str]:
        good = write(d, "good.yaml", BASE_TEXT)
        return ([a.replace("{good}", str(good)).replace("{dir}", str(d)) for a in argv],
                expect.replace("{good}", str(good)).replace("{dir}", str(d)))
    case(id, make, **kw)


argv_case("no-command", [], "COMMAND")
argv_case("unknown-command", ["launch"], "'launch'")
argv_case("unknown-option", ["--verbose", "validate", "{good}"], "--verbose")
argv_case("validate-no-file", ["validate"], "experiment")
argv_case("validate-two-files", ["validate", "{good}", "{good}"], "unrecognized arguments")
argv_case("validate-bad-cc", ["validate", "{good}", "--cc", "warp-speed"], "--cc")
argv_case("validate-empty-cc", ["validate", "{good}", "--cc", ""], "--cc")
argv_case("validate-cc-newline", ["validate", "{good}", "--cc", "reno\nmn-harness: ok"], "--cc")
argv_case("validate-bad-dataplane", ["validate", "{good}", "--dataplane", "ovs"], "--dataplane")
argv_case("validate-stdout-closed", ["validate", "{dir}/missing.yaml"], "{dir}/missing.yaml",
          stdout_closed=True)
argv_case("run-no-file", ["run"], "experiment")
argv_case("run-bad-cc", ["run", "{good}", "--cc", "cubic2"], "--cc")
argv_case("run-cc-mapping-text", ["run", "{good}", "--cc", "{name: reno}"], "--cc")
argv_case("run-bad-dataplane", ["run", "{good}", "--dataplane", "p4"], "--dataplane")
argv_case("run-no-plots-value", ["run", "{good}", "--no-plots=yes"], "--no-plots")
argv_case("run-out-missing-value", ["run", "{good}", "--out"], "--out")
argv_case("run-out-empty", ["run", "{good}", "--out", ""], "--out")
argv_case("run-out-is-file", ["run", "{good}", "--out", "{good}"], "--out")
argv_case("run-out-dev-null", ["run", "{good}", "--out", "/dev/null"], "--out")
argv_case("run-out-under-file", ["run", "{good}", "--out", "{good}/sub"], "--out")
argv_case("run-out-proc", ["run", "{good}", "--out", "/proc/mn-harness"], "--out")
argv_case("run-out-proc-self", ["run", "{good}", "--out", "/proc/self"], "--out")
argv_case("run-out-sys", ["run", "{good}", "--out", "/sys/kernel/mn-harness"], "--out")
argv_case("run-out-dev", ["run", "{good}", "--out", "/dev/mn-harness"], "--out")
argv_case("run-out-newline", ["run", "{good}", "--out", "{good}/a\nb"], "--out")
# the session's options (issue 16): refused before anything is built, like the rest
argv_case("run-pcap-unknown-link", ["run", "{good}", "--pcap", "s1-s9"], "--pcap")
argv_case("run-pcap-empty", ["run", "{good}", "--pcap", ""], "--pcap")
argv_case("run-pcap-three-ends", ["run", "{good}", "--pcap", "h1-s1-s2"], "--pcap")
argv_case("run-pcap-newline", ["run", "{good}", "--pcap", "s1-s2\nmn-harness: ok"], "--pcap")
argv_case("run-cli-bad-mode", ["run", "{good}", "--cli", "before"], "--cli")
argv_case("run-window-no-colon", ["run", "{good}", "--window", "5s"], "--window")
argv_case("run-window-reversed", ["run", "{good}", "--window", "5s:2s"], "--window")
argv_case("run-window-nan", ["run", "{good}", "--window", "nan:5s"], "--window")
argv_case("run-window-bad-unit", ["run", "{good}", "--window", "1 fortnight:2s"], "--window")
argv_case("report-window-empty-end", ["report", "{dir}", "--window", "2s:"], "--window")
argv_case("report-window-inf", ["report", "{dir}", "--window", "0:inf"], "--window")


def _output_dir_file(d: Path) -> tuple[list[str], str]:
    path = write(d, "odir.yaml", mutated(setter("run.output_dir", str(d / "odir.yaml"))))
    return ["run", str(path)], "run.output_dir"


case("run-output-dir-is-file", _output_dir_file)


def _output_dir_proc(d: Path) -> tuple[list[str], str]:
    path = write(d, "odir.yaml", mutated(setter("run.output_dir", "/proc/results")))
    return ["compare", str(path), "--cc", "reno"], "run.output_dir"


case("compare-output-dir-proc", _output_dir_proc)

argv_case("compare-nothing", ["compare"], "compare")
argv_case("compare-cc-comma", ["compare", "{good}", "--cc", ","], "--cc")
argv_case("compare-cc-empty", ["compare", "{good}", "--cc", ""], "--cc")
argv_case("compare-cc-double-comma", ["compare", "{good}", "--cc", "reno,,cubic"], "--cc")
argv_case("compare-cc-trailing-comma", ["compare", "{good}", "--cc", "reno,"], "--cc")
argv_case("compare-cc-unknown", ["compare", "{good}", "--cc", "reno,warp"], "--cc")
argv_case("compare-cc-spaces", ["compare", "{good}", "--cc", " , "], "--cc")
argv_case("compare-repeat-zero", ["compare", "{good}", "--repeat", "0"], "--repeat")
argv_case("compare-repeat-negative", ["compare", "{good}", "--repeat", "-2"], "--repeat")
argv_case("compare-repeat-word", ["compare", "{good}", "--repeat", "three"], "--repeat")
argv_case("compare-repeat-float", ["compare", "{good}", "--repeat", "1.5"], "--repeat")
argv_case("compare-repeat-huge", ["compare", "{good}", "--repeat", "1000000"], "--repeat")
argv_case("compare-repeat-nan", ["compare", "{good}", "--repeat", "nan"], "--repeat")
argv_case("compare-set-no-equals", ["compare", "{good}", "--set", "jobs[0].compute"], "--set")
argv_case("compare-set-bad-path", ["compare", "{good}", "--set", "jobs[0]..compute=1ms"], "--set")
argv_case("compare-set-missing-path", ["compare", "{good}", "--set", "jobs[0].computee=1ms"], "--set")
argv_case("compare-set-index", ["compare", "{good}", "--set", "jobs[7].compute=1ms"], "--set")
argv_case("compare-set-empty-value", ["compare", "{good}", "--set", "jobs[0].compute=10ms,"], "--set")
argv_case("compare-set-no-path", ["compare", "{good}", "--set", "=1ms"], "--set")
argv_case("compare-set-nan", ["compare", "{good}", "--set", "jobs[0].compute=.nan"], "jobs[0].compute")
argv_case("compare-set-bad-unit", ["compare", "{good}", "--set", "links[2].bw=1mbps"], "links[2].bw")
argv_case("compare-set-jobs-scalar", ["compare", "{good}", "--set", "jobs=5"], "jobs")
argv_case("compare-set-newline", ["compare", "{good}", "--set", "jobs[0].compute=1ms\nmn-harness: ok"],
          "jobs[0].compute")
argv_case("compare-set-too-many", ["compare", "{good}", "--set", "jobs[0].iterations=" + ",".join(
    str(i) for i in range(1, 101)), "--set", "jobs[1].iterations=" + ",".join(str(i) for i in range(1, 102))],
    "--set")
argv_case("compare-out-is-file", ["compare", "{good}", "--out", "{good}"], "--out")
argv_case("compare-out-proc", ["compare", "{good}", "--out", "/proc/x"], "--out")
argv_case("compare-resume-and-file", ["compare", "{good}", "--resume", "{dir}"], "--resume")
argv_case("compare-resume-and-cc", ["compare", "--cc", "reno", "--resume", "{dir}"], "--resume")
argv_case("compare-resume-missing", ["compare", "--resume", "{dir}/nope"], "{dir}/nope")
argv_case("compare-resume-not-sweep", ["compare", "--resume", "{dir}"], "{dir}")
argv_case("compare-resume-file", ["compare", "--resume", "{good}"], "{good}")
argv_case("compare-round-one-arg", ["compare", "--round", "{dir}"], "--round")
argv_case("compare-round-not-sweep", ["compare", "--round", "{dir}", "r001"], "{dir}")
argv_case("compare-round-and-file", ["compare", "{good}", "--round", "{dir}", "r001"], "--round")
argv_case("compare-merge-not-sweep", ["compare", "--merge", "{dir}"], "{dir}")
argv_case("compare-merge-and-round", ["compare", "--merge", "{dir}", "--round", "{dir}", "r1"], "--round")


def _servers_file(d: Path) -> Path:
    return write(d, "servers.yaml", mutated(lambda raw: raw.update({"servers": _SERVERS})))


case("run-servers-pcap", lambda d: (["run", str(_servers_file(d)), "--pcap", "s1-s2"], "--pcap"))
case("run-servers-cli", lambda d: (["run", str(_servers_file(d)), "--cli"], "--cli"))


def _planned(d: Path, rounds: str | None) -> Path:
    folder = d / "sweep"
    folder.mkdir()
    folder.chmod(0o755)
    write(folder, "plan.json", json.dumps(_GOOD_PLAN))
    if rounds is not None:
        write(folder, "rounds.json", rounds)
    return folder


case("compare-round-no-rounds", lambda d: (["compare", "--round", str(_planned(d, None)), "r001"],
                                          str(d / "sweep")))
case("compare-round-bad-rounds", lambda d: (["compare", "--round", str(_planned(d, "[]")), "r001"],
                                            str(d / "sweep" / "rounds.json")))
case("compare-merge-no-rounds", lambda d: (["compare", "--merge", str(_planned(d, None))], str(d / "sweep")))


def resume_case(id: str, plan: str | bytes | Callable[[Path], None], expect: str = "plan.json") -> None:
    def make(d: Path) -> tuple[list[str], str]:
        folder = d / "sweep"
        folder.mkdir()
        folder.chmod(0o755)
        if callable(plan):
            plan(folder)
        else:
            write(folder, "plan.json", plan)
        return ["compare", "--resume", str(folder)], expect
    case(f"compare-resume-{id}", make)


_GOOD_PLAN = {"experiment": "corpus", "raw": BASE,
              "runs": [{"label": "reno", "cc": "reno", "set": [], "repetition": 0, "results_dir": None}]}


def _plan(**changes) -> str:
    return json.dumps({**_GOOD_PLAN, **changes})


resume_case("plan-empty", "")
resume_case("plan-not-json", "{plan")
resume_case("plan-list", "[]")
resume_case("plan-binary", b"\x00\x01\x02")
resume_case("plan-utf16", _plan().encode("utf-16"))
resume_case("plan-nan", _plan(experiment=float("nan")))
resume_case("plan-raw-string", _plan(raw="hosts"))
resume_case("plan-runs-dict", _plan(runs={"a": 1}))
resume_case("plan-runs-empty", _plan(runs=[]))
resume_case("plan-run-missing-label", _plan(runs=[{"cc": None, "set": [], "repetition": 0}]))
resume_case("plan-run-set-string", _plan(runs=[{"label": "x", "cc": None, "set": "jobs", "repetition": 0}]))
resume_case("plan-run-set-pairs", _plan(runs=[{"label": "x", "cc": None, "set": [["a"]], "repetition": 0}]))
resume_case("plan-run-cc-int", _plan(runs=[{"label": "x", "cc": 5, "set": [], "repetition": 0}]))
resume_case("plan-run-cc-unknown", _plan(runs=[{"label": "x", "cc": "warp", "set": [], "repetition": 0}]))
resume_case("plan-run-repetition-string", _plan(runs=[{"label": "x", "cc": None, "set": [], "repetition": "0"}]))
resume_case("plan-run-results-dir-int", _plan(runs=[{"label": "x", "cc": None, "set": [], "repetition": 0,
                                                     "results_dir": 5}]))
resume_case("plan-invalid-experiment", _plan(raw={**BASE, "hosts": []}), "hosts")
resume_case("plan-set-path-gone", _plan(runs=[{"label": "x", "cc": None, "set": [["jobs[0].nope", 1]],
                                                "repetition": 0}]), "--set")
resume_case("plan-dir", lambda f: (f / "plan.json").mkdir())
resume_case("plan-fifo", lambda f: os.mkfifo(f / "plan.json"))
resume_case("plan-huge", lambda f: write(f, "plan.json", " " * (64 << 20) + "{}"))
resume_case("plan-duplicate-keys", '{"experiment": "a", "experiment": "b", "raw": {}, "runs": []}')


# report: the folder and what is in it


def report_case(id: str, files: dict[str, str | bytes] | Callable[[Path], Path], expect: str = "{folder}") -> None:
    def make(d: Path) -> tuple[list[str], str]:
        folder = d / "results"
        folder.mkdir()
        folder.chmod(0o755)
        if callable(files):
            folder = files(folder)
        else:
            for name, data in files.items():
                write(folder, name, data)
        return ["report", str(folder), "--no-plots"], expect.replace("{folder}", str(folder))
    case(f"report-{id}", make)


_ITER = ("job,rank,iteration,t_start,t_comm_start,t_comm_end,iter_time,comm_time,bytes_sent\n"
         "A,0,0,0,0.5,1,1,0.5,100\n")
_SUMMARY = json.dumps({"experiment": "x", "cc": {"A": "reno"}, "jobs": {"A": {"workers": ["h1", "h2"],
                       "iterations": 1}}, "link_jobs": {}, "status": "completed"})

argv_case("report-missing", ["report", "{dir}/nope"], "{dir}/nope")
argv_case("report-a-file", ["report", "{good}"], "{good}")
argv_case("report-no-arg", ["report"], "results_dir")
argv_case("report-proc", ["report", "/proc"], "/proc")
report_case("no-summary", {"iterations.csv": _ITER})
report_case("summary-empty", {"summary.json": "", "iterations.csv": _ITER}, "summary.json")
report_case("summary-not-json", {"summary.json": "{status: ok", "iterations.csv": _ITER}, "summary.json")
report_case("summary-list", {"summary.json": "[1, 2]", "iterations.csv": _ITER}, "summary.json")
report_case("summary-string", {"summary.json": '"completed"', "iterations.csv": _ITER}, "summary.json")
report_case("summary-binary", {"summary.json": b"\x00\xff\x00", "iterations.csv": _ITER}, "summary.json")
report_case("summary-utf16", {"summary.json": _SUMMARY.encode("utf-16"), "iterations.csv": _ITER}, "summary.json")
report_case("summary-latin1", {"summary.json": _SUMMARY.replace('"x"', '"\xe9"').encode("latin-1"),
                               "iterations.csv": _ITER}, "summary.json")
report_case("summary-truncated", {"summary.json": _SUMMARY[: len(_SUMMARY) // 2], "iterations.csv": _ITER},
            "summary.json")
report_case("summary-jobs-list", {"summary.json": json.dumps({"jobs": ["A"]}), "iterations.csv": _ITER},
            "summary.json")
report_case("summary-job-int", {"summary.json": json.dumps({"jobs": {"A": 5}}), "iterations.csv": _ITER},
            "summary.json")
report_case("summary-workers-int", {"summary.json": json.dumps({"jobs": {"A": {"workers": 3}}}),
                                    "iterations.csv": _ITER}, "summary.json")
report_case("summary-cc-list", {"summary.json": json.dumps({"cc": ["reno"], "jobs": {}}),
                                "iterations.csv": _ITER}, "summary.json")
report_case("summary-link-ranks-bad", {"summary.json": json.dumps(
    {"jobs": {}, "link_ranks": {"s1->s2": {"A": ["x"]}}}), "iterations.csv": _ITER}, "summary.json")
report_case("summary-link-bps-bad", {"summary.json": json.dumps({"jobs": {}, "link_bps": {"s1->s2": "fast"}}),
                                     "iterations.csv": _ITER}, "summary.json")
report_case("summary-link-jobs-bad", {"summary.json": json.dumps({"jobs": {}, "link_jobs": {"s1->s2": 5}}),
                                      "iterations.csv": _ITER}, "summary.json")
report_case("summary-huge", lambda f: (write(f, "summary.json", " " * (65 << 20) + "{}"),
                                       write(f, "iterations.csv", _ITER))[0].parent, "summary.json")
report_case("summary-dir", lambda f: ((f / "summary.json").mkdir(), write(f, "iterations.csv", _ITER))[1].parent,
            "summary.json")
report_case("summary-fifo", lambda f: (os.mkfifo(f / "summary.json"), write(f, "iterations.csv", _ITER))[1].parent,
            "summary.json")
report_case("summary-dangling", lambda f: ((f / "summary.json").symlink_to(f / "gone"),
                                           write(f, "iterations.csv", _ITER))[1].parent, "summary.json")
report_case("no-iterations", {"summary.json": _SUMMARY}, "iterations.csv")
report_case("iterations-dir", lambda f: ((f / "iterations.csv").mkdir(), write(f, "summary.json", _SUMMARY))[1].parent,
            "iterations.csv")
report_case("iterations-fifo", lambda f: (os.mkfifo(f / "iterations.csv"),
                                          write(f, "summary.json", _SUMMARY))[1].parent, "iterations.csv")
report_case("not-writable", lambda f: (write(f, "summary.json", _SUMMARY), write(f, "iterations.csv", _ITER),
                                       f.chmod(0o555))[0].parent)

# clean: its arguments and the state directory it reads


def clean_case(id: str, files: dict[str, str | bytes] | None, expect: str, env_dir: str | None = None,
               argv: list[str] | None = None) -> None:
    def make(d: Path) -> tuple[list[str], str]:
        state = d / "state"
        state.mkdir()
        state.chmod(0o755)
        for name, data in (files or {}).items():
            write(state, name, data)
        return (argv or ["clean"]), expect.replace("{state}", str(state))
    env = {"MN_HARNESS_STATE_DIR": env_dir or "{dir}/state"}
    case(f"clean-{id}", make, env=env)


clean_case("extra-argument", None, "now", argv=["clean", "now"])
clean_case("unknown-option", None, "--all", argv=["clean", "--all"])
clean_case("force-value", None, "--force", argv=["clean", "--force=yes"])
clean_case("state-not-json", {"1-x.json": "{nope"}, "{state}/1-x.json")
clean_case("state-empty", {"1-x.json": ""}, "{state}/1-x.json")
clean_case("state-list", {"1-x.json": "[]"}, "{state}/1-x.json")
clean_case("state-binary", {"1-x.json": b"\x00\x01"}, "{state}/1-x.json")
clean_case("state-no-version", {"1-x.json": json.dumps({"run_id": "1-x"})}, "{state}/1-x.json")
_STATE = {"version": 2, "run_id": "1-x", "results_dir": "/tmp/r",
          "harness": {"pid": 1, "start_time": 1, "cmdline": ["x"]}, "undo": {}}


def _state(**changes) -> dict[str, str]:
    return {"1-x.json": json.dumps({**_STATE, **changes})}


def _record(**fields) -> dict[str, str]:
    return _state(undo={"network": [{"kind": "process", "pid": 7, "start_time": 1, "cmdline": ["bash"],
                                     **fields}]})


clean_case("state-harness-pid-string", _state(harness={"pid": "1", "start_time": 1, "cmdline": ["x"]}),
           "harness.pid")
clean_case("state-undo-list", _state(undo=[]), "undo")
clean_case("state-section-dict", _state(undo={"network": {"kind": "process"}}), "undo.network")
clean_case("state-unknown-kind", _state(undo={"net": [{"kind": "rm-rf", "path": "/"}]}), "undo.net[0]")
clean_case("state-record-pid-string", _record(pid="7"), "undo.network[0].pid")
clean_case("state-record-pid-bool", _record(pid=True), "undo.network[0].pid")
clean_case("state-record-cmdline-string", _record(cmdline="bash"), "undo.network[0].cmdline")
clean_case("state-record-missing-start", {"1-x.json": json.dumps({**_STATE, "undo": {"network": [
    {"kind": "process", "pid": 7, "cmdline": ["bash"]}]}})}, "undo.network[0].start_time")
clean_case("state-record-unknown-field", _record(signal=9), "'signal'")
clean_case("state-version-3", _state(version=3), "version 3")
clean_case("state-old-format", {"1-x.json": json.dumps(
    {"run_id": "1-x", "harness_pid": 1, "processes": [[1, "mininet:h1"]]})}, "{state}/1-x.json")
clean_case("state-dir-is-file", None, "MN_HARNESS_STATE_DIR", env_dir="/etc/passwd")
clean_case("state-dir-proc", None, "MN_HARNESS_STATE_DIR", env_dir="/proc/self/status")
