"""What each BMv2 switch of an experiment is programmed with, and whether its program can take it.

`switch_setups(plan)` is the one place that turns a NetworkPlan into per-switch SwitchSetups
(program, queues from the links' `bw` and `queue`, ECN thresholds, job rules, aggregation jobs,
whether its ports are sampled): the BMv2 data plane brings its switches up with them, and the P4
test bed (mn_harness.testing) with the same ones, so a unit test sees the switch an experiment
runs.

Each SwitchSetup says which program features (mn_harness.p4.contract) the experiment asks of the
switch; `feature_reasons` says why in the experiment file's terms, so a program that lacks one is
refused in one line naming the YAML path that chose the program, what is missing and the setting
that needs it. `check_programs` is that check for `mn-harness validate` and `run`: it compiles
the programs given as paths (p4c; the shipped ones meet the contract, tests/p4/test_contract.py)
and, where p4c is not installed, says in one line that it cannot check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mn_harness.dataplane.errors import DataplaneError
from mn_harness.dataplane.queues import link_label, monitored_interfaces, port_threshold
from mn_harness.errors import ConfigError
from mn_harness.network.plan import NetworkPlan
from mn_harness.p4 import DEFAULT_PROGRAM, PROGRAMS_DIR, find_program, shipped_programs

if TYPE_CHECKING:  # the bring-up loads grpc: `validate` of a file without programs of its own needs none
    from mn_harness.p4.bringup import SwitchSetup
    from mn_harness.p4.compile import CompiledProgram

CONTRACT_DOC = "docs/p4.md#the-program-contract"


def resolve_program(name: str | None) -> Path:
    """A SwitchConfig.program: None -> ecn_telemetry; a name -> mn_harness/p4/programs/<name>.p4;
    or a path (the config made it absolute, relative to the experiment file)."""
    path = find_program(name)
    if path is None:
        name = name or DEFAULT_PROGRAM
        raise DataplaneError(f"P4 program {name!r} not found (looked for "
                             f"{PROGRAMS_DIR / (name + '.p4')} and {name})")
    return path


def switch_setups(plan: NetworkPlan, compile: Callable[[Path], CompiledProgram] | None = None,
                  only: set[str] | None = None) -> dict[str, SwitchSetup]:
    """Per switch (or the switches in `only`): its program compiled by `compile` (default
    compile_p4), the queues of its links, its ports' ECN thresholds, the job rules, its
    aggregation jobs (inc_allreduce jobs whose workers hang off it) and whether
    run.queue_telemetry samples any of its ports."""
    from mn_harness.p4.aggregation import plan_agg_jobs
    from mn_harness.p4.bmv2 import QueueConfig
    from mn_harness.p4.bringup import SwitchSetup
    from mn_harness.p4.compile import compile_p4
    from mn_harness.p4.entries import plan_job_rules, switch_specs

    compile = compile or compile_p4
    specs = switch_specs(plan)
    rules = plan_job_rules(plan)
    inc_slots = {j.name: j.inc.slots for j in plan.experiment.jobs if j.inc is not None}
    agg_jobs = plan_agg_jobs(plan, inc_slots) if inc_slots else {}
    sampled = {i.node for i in monitored_interfaces(plan)}
    setups = {}
    for cfg in plan.experiment.switches:
        if only is not None and cfg.name not in only:
            continue
        intfs = plan.interfaces.get(cfg.name, [])
        queues = {i.port: QueueConfig.for_link(i.link.bw_bps / 1e6, i.link.queue_packets) for i in intfs}
        thresholds = {i.port: port_threshold(plan, i).threshold_packets() for i in intfs}
        setups[cfg.name] = SwitchSetup(specs[cfg.name], compile(resolve_program(cfg.program)),
                                       queues=queues, port_thresholds=thresholds, job_rules=rules,
                                       agg_jobs=agg_jobs.get(cfg.name, ()),
                                       telemetry=cfg.name in sampled)
    return setups


def feature_reasons(plan: NetworkPlan, switch: str) -> dict[str, str]:
    """Why the experiment asks `switch` for each optional feature, in the file's terms."""
    exp = plan.experiment
    intfs = plan.interfaces.get(switch, [])
    reasons = {}
    marking = [(i, port_threshold(plan, i)) for i in intfs if not port_threshold(plan, i).off]
    if marking:
        intf, threshold = marking[0]
        reasons["ecn_marking"] = (f"{link_label(intf)} marks at {threshold.describe()}; "
                                  "ecn_threshold: off turns marking off")
    sampled = [i for i in monitored_interfaces(plan) if i.node == switch]
    if sampled:
        reasons["queue_telemetry"] = (f"run.queue_telemetry samples {link_label(sampled[0])}; "
                                      "false or a list of links without it turns that off")
    if exp.routing == "ecmp":
        reasons["ecmp"] = f"routing: ecmp gives {switch} equal-cost next hops"
    for k, job in enumerate(exp.jobs):
        if job.inc is not None and plan.gateway(job.workers[0]).peer_node == switch:
            reasons["aggregation"] = f"jobs[{k}] aggregates on {switch} (collective: inc_allreduce)"
            break
    return reasons


def program_path(plan: NetworkPlan, switch: str) -> str:
    """The YAML path of a switch's `program` (or of the switch when it has none)."""
    index = next(i for i, s in enumerate(plan.experiment.switches) if s.name == switch)
    has_program = plan.experiment.switches[index].program is not None
    return f"switches[{index}]" + (".program" if has_program else "")


def check_setup(plan: NetworkPlan, switch: str, setup: SwitchSetup, p4info) -> None:
    """ConfigError at the switch's `program` path when its program lacks a feature it is asked
    for: `switches[0].program: mine.p4 lacks counter 'qdepth_hist' (queue telemetry: ...)`."""
    from mn_harness.p4.contract import ContractError

    try:
        setup.check(p4info, feature_reasons(plan, switch))
    except ContractError as exc:
        raise ConfigError(program_path(plan, switch), f"{exc}; the contract: {CONTRACT_DOC}") from None


def check_programs(plan: NetworkPlan) -> list[str]:
    """`validate`'s check of the programs given as paths against the contract, for the BMv2
    data plane (`bmv2`, or `auto` where BMv2 is installed). Raises ConfigError for a program
    that does not compile or lacks a feature the experiment asks of it; returns one line per
    program checked, or one line saying it cannot check (no p4c here)."""
    exp = plan.experiment
    mine = {s.name for s in exp.switches if s.program is not None and s.program not in shipped_programs()}
    if not mine or exp.run.dataplane == "linux":
        return []
    from mn_harness.errors import one_line
    from mn_harness.p4.compile import CACHE_ENV, compile_p4
    from mn_harness.p4.contract import FEATURES
    from mn_harness.p4.errors import CompileError, ToolchainMissing
    from mn_harness.p4.runtime import P4Info

    if exp.run.dataplane == "auto":
        from mn_harness.dataplane import bmv2_unavailable_reason

        if bmv2_unavailable_reason() is not None:
            return []  # auto runs the Linux routers here: the programs are not used
    compiled: dict[Path, CompiledProgram] = {}
    errors: dict[Path, Exception] = {}

    def build(path: Path) -> CompiledProgram:
        if path not in compiled and path not in errors:
            try:
                compiled[path] = compile_p4(path)
            except (CompileError, ToolchainMissing) as exc:
                errors[path] = exc
        if path in errors:
            raise errors[path]
        return compiled[path]

    lines = []
    for switch in [s.name for s in exp.switches if s.name in mine]:
        where = program_path(plan, switch)
        try:
            setup = switch_setups(plan, build, only={switch})[switch]
        except ToolchainMissing as exc:
            return [f"note: cannot check {where} against the program contract here: {exc}"]
        except OSError as exc:  # p4c's cache cannot be written (a user without a home)
            return [f"note: cannot check {where} against the program contract here: cannot write "
                    f"p4c's cache ({one_line(exc)}; {CACHE_ENV} names another folder)"]
        except CompileError as exc:
            raise ConfigError(where, str(exc).splitlines()[0]) from None
        check_setup(plan, switch, setup, P4Info.from_file(setup.program.p4info_path))
        lines.append(f"program {switch}: {setup.program.source.name} meets the contract for "
                     f"{', '.join(FEATURES[f].title for f in setup.features())}")
    return lines
