"""What the helpers that start real servers share: a free loopback port, the tail of a log, a process group's end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of ``path`` ("" if it does not exist), to put in a start-up error."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    """Signal the process group ``process`` leads (started with ``start_new_session``), if anything of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
