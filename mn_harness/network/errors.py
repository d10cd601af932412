"""Network-layer errors: something the kernel refused while building the emulated network."""


class NetworkError(RuntimeError):
    """Building or configuring the network failed; the message is one readable line."""


class MissingKernelFeature(NetworkError):
    """The kernel lacks a qdisc or module the experiment asks for (e.g. netem for `delay`)."""
