"""Network-layer errors: something the kernel refused while building the emulated network."""

from mn_harness.errors import RunError


class NetworkError(RunError):
    """Building or configuring the network failed; the message is one readable line."""


class MissingKernelFeature(NetworkError):
    """The kernel lacks a qdisc or module the experiment asks for (e.g. netem for `delay`)."""
