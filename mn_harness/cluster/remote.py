"""The head's side of `clean` for a cluster run: a server's part is undone there, by that
server's own records of it (mn_harness.cluster.agent's `clean RUN`), over ssh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mn_harness.cluster.ssh import ServerError, run_remote
from mn_harness.config.servers import ServerConfig
from mn_harness.errors import one_line


def server_of(record: Any) -> ServerConfig:
    return ServerConfig(record.server, record.address, record.user, record.port, record.python or None)


def clean_part(record: Any, log: Callable[[str], None]) -> bool:
    """True when nothing of the part is left on its server (cleaned now, or gone already)."""
    server = server_of(record)
    try:
        out = run_remote(server, ["clean", record.run_id]).strip()
    except ServerError as exc:
        log(f"could not clean {server.where}: {one_line(exc)}")
        return False
    last = out.splitlines()[-1] if out else ""
    if last.startswith("still running"):
        log(f"{server.where}: its part of run {record.run_id} is still being torn down ({last}); "
            "run `mn-harness clean` again in a few seconds")
        return False
    log(f"{server.where}: {last or 'cleaned'}")
    return True
