"""Not a test module: stand-in executables for the BMv2-free unit tests (p4c, simple_switch_grpc,
simple_switch_CLI as small shell scripts)."""

import stat
import textwrap
from pathlib import Path


def script(path: Path, body: str) -> str:
    """An executable /bin/sh script at `path` running `body` (dedented); its path."""
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
