"""What the helpers that start real servers share: a free loopback port, the tail of a log."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of ``path`` ("" if it does not exist), to put in a start-up error."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
