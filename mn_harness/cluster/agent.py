"""The project on a server of a cluster run: `python -m mn_harness.cluster.agent`, started by the
head over ssh (mn_harness.cluster.ssh), one per server and run.

It answers one JSON request per line on stdin with one JSON line on stdout, `{"id": n, ...}` or
`{"id": n, "error": "<one line>"}`, and sends its log lines as `{"log": ...}`; everything else
that would print (Mininet, the tool chain) goes to stderr, never into the protocol. The requests,
in the order the head makes them (mn_harness.cluster.head):

    hello                     its version and package digest, kernel (boot id), tunnel kinds
    clock                     its CLOCK_MONOTONIC now (the head's offset probes)
    prepare                   the experiment (config.yaml's text), this server's name, the run;
                              registers the congestion controls when told to (one server per
                              kernel); its underlay towards each peer (address, device, MTU)
    tunnels / drop_tunnels    make (or drop) its ends of the links to other servers
    build                     its nodes, links, tunnels moved in, routes, queues
    start, go                 its workers up and READY; their start time on this clock
    poll                      progress, done, or the one line of what died
    stop, release_cc, pack    teardown, the congestion controls, its folder (tar, base64)
    bye                       the rest of the teardown; exits

The agent holds the run only while the head holds it: on EOF (the head ended or its ssh did),
on SIGTERM/SIGHUP, or when nothing came for LEASE_S (the head or the network between them is
gone: a partitioned server cannot be told to stop) it tears its part down by itself and exits.
`... agent clean RUN` undoes what a part of that run left on this server, by its state file."""

from __future__ import annotations

import json
import os
import select
import sys
import time
import traceback
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mn_harness.cluster.part import ServerPart

LEASE_ENV = "MN_HARNESS_AGENT_LEASE"
LEASE_S = 10.0


def lease_s() -> float:
    try:
        value = float(os.environ.get(LEASE_ENV) or LEASE_S)
    except ValueError:
        return LEASE_S
    return value if value > 0 else LEASE_S


class HeadGone(Exception):
    """Nothing more will come from the head: EOF, or the lease ran out."""


class Agent:
    def __init__(self, out: IO[str], inp: IO[bytes]):
        self.out = out
        self.inp = inp
        self.part: ServerPart | None = None
        self.lease = lease_s()
        self._buffer = b""

    def send(self, message: dict) -> None:
        try:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()
        except (BrokenPipeError, OSError):
            raise HeadGone("the head's line is closed") from None

    def log(self, line: str) -> None:
        try:
            self.send({"log": line})
        except HeadGone:
            pass  # the teardown goes on; the part's harness.log keeps the line

    def read(self) -> dict:
        """The next request; HeadGone on EOF or when the lease runs out."""
        deadline = time.monotonic() + self.lease
        fd = self.inp.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HeadGone(f"nothing from the head for {self.lease:g}s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise HeadGone("the head closed the line")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def serve(self) -> int:
        from mn_harness.errors import HarnessError, one_line
        from mn_harness.interrupts import terminate_as_interrupt

        with terminate_as_interrupt():
            try:
                while True:
                    request = self.read()
                    ident, op = request.get("id"), request.get("op")
                    if op == "ping":  # the head is there: the lease goes on
                        continue
                    try:
                        answer = self.handle(str(op), request)
                    except HeadGone:
                        raise
                    except HarnessError as exc:
                        self.send({"id": ident, "error": one_line(exc)})
                        continue
                    except Exception as exc:  # a bug: its traceback on stderr (the head keeps the tail)
                        traceback.print_exc()
                        self.send({"id": ident, "error": f"{op}: {type(exc).__name__}: {one_line(exc)}"})
                        continue
                    self.send({"id": ident, **answer})
                    if op == "bye":
                        return 0
            except HeadGone as exc:
                self.log(f"head gone ({exc}): tearing down")
                return 1
            except KeyboardInterrupt:
                return 130
            finally:
                if self.part is not None:
                    self.part.close()

    # -- the requests ------------------------------------------------------------------------
    def handle(self, op: str, r: dict) -> dict[str, Any]:
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown request {op!r}")
        return handler(r)

    def op_hello(self, r: dict) -> dict:
        from mn_harness.cluster.tunnel import probe_kinds
        from mn_harness.cluster.version import identity

        uname = os.uname()
        return {**identity(), "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                "kernel": uname.release, "hostname": uname.nodename, "root": os.geteuid() == 0,
                "tunnels": probe_kinds(), "python": sys.executable}

    def op_clock(self, r: dict) -> dict:
        return {"t": time.monotonic()}

    def op_prepare(self, r: dict) -> dict:
        import yaml

        from mn_harness.cluster.part import ServerPart
        from mn_harness.cluster.tunnel import underlay
        from mn_harness.config import Experiment

        experiment = Experiment.from_dict(yaml.safe_load(r["config"]), default_name="experiment")
        self.part = ServerPart(experiment, r["server"], r["run"], self.log)
        names = self.part.register_ccs() if r.get("register_cc") else {}
        return {"cc_names": names, "underlay": {peer: underlay(address) for peer, address in r["peers"].items()}}

    def op_tunnels(self, r: dict) -> dict:
        from mn_harness.cluster.tunnel import TunnelEnd

        results = self._part().make_tunnels([TunnelEnd.from_dict(e) for e in r["ends"]])
        return {"results": {str(k): v for k, v in results.items()}}

    def op_drop_tunnels(self, r: dict) -> dict:
        self._part().drop_tunnels([int(x) for x in r["links"]])
        return {}

    def op_build(self, r: dict) -> dict:
        started = time.monotonic()
        self._part().build(r["cc_names"])
        return {"setup_s": round(time.monotonic() - started, 3)}

    def op_start(self, r: dict) -> dict:
        self._part().start()
        return {}

    def op_go(self, r: dict) -> dict:
        self._part().go(float(r["t0"]))
        return {}

    def op_poll(self, r: dict) -> dict:
        return self._part().poll()

    def op_stop(self, r: dict) -> dict:
        return {"facts": self._part().stop()}

    def op_release_cc(self, r: dict) -> dict:
        return {"rows": self._part().release_ccs()}

    def op_pack(self, r: dict) -> dict:
        return {"tar": self._part().pack()}

    def op_bye(self, r: dict) -> dict:
        part, self.part = self.part, None
        clean = part.close() if part is not None else True
        return {"clean": clean}

    def _part(self) -> ServerPart:
        if self.part is None:
            raise ValueError("no run prepared on this server")
        return self.part


def clean_run(run: str) -> int:
    """Undo what the part of run `run` left on this server (its state files); print what is left."""
    from mn_harness.state import clean, read_state_files, state_dir

    files, _ = read_state_files()
    mine = [f for f in files if f.run_id.split("-part-", 1)[-1].startswith(f"{run}-")]
    if not mine:
        print("nothing left")
        return 0
    alive = [f for f in mine if f.harness_alive()]
    if alive:
        print(f"still running: pid {alive[0].harness.pid if alive[0].harness else '?'}")
        return 3
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="mn-harness-clean-"))
    try:  # clean() works on a directory: give it this run's files only
        for f in mine:
            os.replace(f.path, scratch / f.path.name)
        clean(log=lambda line: print(line, file=sys.stderr), directory=scratch)
    finally:
        for path in scratch.glob("*.json"):
            os.replace(path, state_dir() / path.name)
        os.rmdir(scratch)
    print("cleaned")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["clean"] and len(argv) == 2:
        from mn_harness.errors import HarnessError, one_line

        try:
            return clean_run(argv[1])
        except HarnessError as exc:
            print(one_line(exc), file=sys.stderr)
            return 1
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    # the protocol owns stdout: anything else that prints goes to stderr
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return Agent(protocol, sys.stdin.buffer).serve()


if __name__ == "__main__":
    sys.exit(main())
