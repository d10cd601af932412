"""bench/perf_profile.py (no runs, no root): `perf script` text parsed into samples, and the
classification of stacks as recorded on this project's VM (kernel 6.18) into components and
contexts."""

from tests.helpers import bench_module

SCRIPT = """\
python 4242/4250 [001] 10.000100:
\tffffffff8223a1e0 rep_movs_alternative+0x30 ([kernel.kallsyms])
\tffffffff81e6b0c1 _copy_to_iter+0x91 ([kernel.kallsyms])
\tffffffff81f2a4a1 __skb_datagram_iter+0x71 ([kernel.kallsyms])
\tffffffff81f2a6f8 skb_copy_datagram_iter+0x38 ([kernel.kallsyms])
\tffffffff8204e2b5 tcp_recvmsg_locked+0x255 ([kernel.kallsyms])
\tffffffff8204f0c4 tcp_recvmsg+0x74 ([kernel.kallsyms])
\tffffffff81f0c3a2 __sys_recvfrom+0xd2 ([kernel.kallsyms])
\t          1328ef _PyEval_EvalFrameDefault (/usr/bin/python3.11)

python 4242/4251 [000] 10.000200:
\tffffffff81e4e2a0 kmem_cache_free+0x40 ([kernel.kallsyms])
\tffffffff81f43c10 skb_release_data+0x120 ([kernel.kallsyms])
\tffffffffc0a1b0d0 veth_xmit+0x1b0 ([kernel.kallsyms])
\tffffffff81f4e1a2 dev_hard_start_xmit+0xa2 ([kernel.kallsyms])
\tffffffff81fa2d31 sch_direct_xmit+0x111 ([kernel.kallsyms])
\tffffffff81fa3102 __qdisc_run+0x142 ([kernel.kallsyms])
\tffffffff81f4e9c0 __dev_queue_xmit+0x5c0 ([kernel.kallsyms])
\tffffffff8201c111 ip_finish_output2+0x1a1 ([kernel.kallsyms])
\tffffffff81f5a0e1 net_rx_action+0x1e1 ([kernel.kallsyms])
\tffffffff8137c4d2 handle_softirqs+0xd2 ([kernel.kallsyms])
\tffffffff8137c7a3 __local_bh_enable_ip+0x53 ([kernel.kallsyms])
\tffffffff8204d1d3 tcp_sendmsg+0x33 ([kernel.kallsyms])

swapper 0/0 [000] 10.000300:
\tffffffff8224215b pv_native_safe_halt+0xb ([kernel.kallsyms])
\tffffffff82243c75 default_idle+0x5 ([kernel.kallsyms])
\tffffffff813d09d6 do_idle+0x1e6 ([kernel.kallsyms])

swapper 0/0 [001] 10.000400:
\tffffffffa0001a2c bpf_prog_6deef7357e7b4530_mnh_dequeue+0x8c ([kernel.kallsyms])
\tffffffff81522a10 bpf_trace_run4+0x70 ([kernel.kallsyms])
\tffffffff81fa1e00 htb_dequeue+0x400 ([kernel.kallsyms])
\tffffffff81fa3102 __qdisc_run+0x142 ([kernel.kallsyms])
\tffffffff81f5a0e1 net_tx_action+0x1e1 ([kernel.kallsyms])
\tffffffff8137c4d2 handle_softirqs+0xd2 ([kernel.kallsyms])
\tffffffff8224215b pv_native_safe_halt+0xb ([kernel.kallsyms])

python 4242/4252 [001] 10.000500:
\t          1328ef _PyEval_EvalFrameDefault (/usr/bin/python3.11)

python 999/999 [000] 10.000600:
\t          1328ef _PyEval_EvalFrameDefault (/usr/bin/python3.11)
"""


def samples(pp):
    return list(pp.parse_script(SCRIPT.splitlines()))


def test_perf_script_text_becomes_samples_leaf_first():
    pp = bench_module("perf_profile")
    got = samples(pp)
    assert [(s.comm, s.pid, s.tid) for s in got] == [("python", 4242, 4250), ("python", 4242, 4251), ("swapper", 0, 0),
                                                      ("swapper", 0, 0), ("python", 4242, 4252), ("python", 999, 999)]
    assert got[0].time == 10.0001
    assert got[0].frames[0].sym == "rep_movs_alternative" and got[0].frames[0].kernel
    assert not got[0].frames[-1].kernel


def test_each_stack_goes_to_the_component_nearest_its_leaf_and_to_its_threads_role():
    pp = bench_module("perf_profile")
    roles = pp.Roles(harness_pid=1, workers={4242: "synthetic"})
    copy, veth, idle, monitor, user, other = samples(pp)
    for s, name in ((copy, "mnh-recv"), (veth, "mnh-send"), (user, "mnh-bins")):
        s.comm = name  # the comm perf reports for the worker's named threads
    assert pp.classify(copy, roles) == ("payload copy (user <-> socket)", "worker receive threads")
    # the freeing under veth_xmit is veth's; run as a softirq on the sender's thread
    assert pp.classify(veth, roles) == ("veth (namespace crossing)", "softirq in worker send threads")
    assert pp.classify(idle, roles) == ("idle", "idle (interrupted)")
    assert pp.classify(monitor, roles) == ("fidelity link program (qdisc_dequeue tracepoint)",
                                           "softirq in idle (interrupted)")
    assert pp.classify(user, roles) == ("user space: worker throughput samplers", "worker throughput samplers")
    assert pp.classify(other, roles) == ("user space: other processes (not this run)", "other processes (not this run)")


def test_a_profile_counts_only_its_window_and_converts_samples_to_cores():
    pp = bench_module("perf_profile")
    prof = pp.profile(samples(pp), pp.Roles(harness_pid=1, workers={4242: "synthetic"}), 10.00015, 10.00055)
    assert sum(prof.components.values()) == 4  # the first and the last sample are outside
    assert prof.components["idle"] == 1 and prof.busy == 3
    assert prof.softirq["veth (namespace crossing)"] == 1
    assert abs(prof.cores_of(4) - 4 * 1e-3 / 0.0004) < 1e-9


def test_a_data_planes_queue_sampler_is_known_by_its_type_whatever_its_thread_name(tmp_path):
    pp = bench_module("perf_profile")
    from mn_harness.dataplane.queue_csv import QueueCollector

    # started for real, as the data planes start theirs under their own names
    collector = QueueCollector(tmp_path / "queue.csv", ["job1"], lambda: [], t0=0.0, sample_hz=10.0,
                               name="linux-queue-telemetry")
    collector.start()
    try:
        roles = pp.Roles(harness_pid=999)
        roles.note_harness_threads()
    finally:
        collector.stop()
    sample = samples(pp)[-1]  # user space in pid 999
    sample.tid = collector.native_id
    assert pp.classify(sample, roles)[1] == "harness: queue sampler"
    sample.tid = 12345678  # a thread the harness does not have
    assert pp.classify(sample, roles)[1] == "harness: unnamed threads"
