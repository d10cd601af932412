"""The worker that runs inside each emulated host: collectives over kernel TCP sockets."""
