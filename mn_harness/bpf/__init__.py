"""The BPF pieces shared by the congestion controls (mn_harness/cc) and the Linux data plane's
egress program (mn_harness/dataplane/egress): the tool-chain check, vmlinux.h and the
content-hash build cache (`toolchain`), and the few bpf(2) map commands the harness needs at run
time (`syscall`). Standard library only; nothing here loads Mininet."""
