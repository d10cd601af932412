"""ECN marking and queue counters on the Linux data plane: a tc BPF program on each router
port's clsact egress hook (bpf/egress_queue.bpf.c), compiled per port configuration
(`build`), attached and read through its maps (`program`), chosen per kernel (`probe`) and
sampled into queue.csv (`sampler`). How it works and how accurately: docs/ecn.md, "How the Linux
routers mark, on each kernel"."""
