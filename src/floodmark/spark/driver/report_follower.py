"""The query's batch reports on a Spark Connect client, read from the metrics file the server's controller writes.

On a classic session the controller runs in the client's own process (the ``foreachBatch`` sink calls it), so the
handle reads its reports, reconciliation and listeners from it directly. Over Spark Connect the sink, and with it
the controller, runs in a Python process of the server; the client keeps its own copy of the controller (the one
the query was started with) and brings it up to date from what the server's copy appends to
``<checkpoint>/floodmark/metrics.jsonl`` (a JSON line per completed batch, never one for a replay:
:meth:`~floodmark.driver.controller.Controller.record`). Each line read is recorded in the client's copy, as the
sink records it in the server's, then handed to the listeners (the Prometheus endpoint included), here on the
client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from floodmark.driver.controller import Controller
from floodmark.driver.reports import BatchReport

POLL_S = 0.1
"""How often the follower's thread reads the file (the handle also reads it whenever it is asked for reports)."""


class ReportFollower:
    """Reads the lines appended to ``path`` since it was made and records them in a controller.

    The file rolls over at 64 MiB (it becomes ``<path>.1`` and a new one starts): the follower finishes the rolled
    file from where it was, then reads the new one from its start.

    :arg path: the metrics file the server's controller appends to.
    :arg controller: which controller records the reports (called for each read: a restarted query's handle has a
        new one). :arg listeners: called with each report after it is recorded.
    """

    def __init__(
        self, path: Path, controller: Callable[[], Controller], listeners: Sequence[Callable[[BatchReport], None]]
    ) -> None:
        self.path = path
        self.controller = controller
        self.listeners = list(listeners)
        self._offset = path.stat().st_size if path.exists() else 0
        self._partial = b""
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="floodmark-report-follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Read what is left, then stop the thread."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self.poll()

    def _follow(self) -> None:
        while not self._stopped.wait(POLL_S):
            self.poll()

    def poll(self) -> None:
        """Record the complete lines appended since the last poll (a line being written waits for the next)."""
        with self._lock:
            for line in self._new_lines():
                report = BatchReport.from_json(line)
                self.controller().record(report)
                for listener in self.listeners:
                    listener(report)

    def _new_lines(self) -> list[str]:
        data = b""
        if self.path.exists() and self.path.stat().st_size < self._offset:  # rolled over since the last poll
            data = _read_from(self.path.with_name(self.path.name + ".1"), self._offset)
            self._offset = 0
        appended = _read_from(self.path, self._offset)
        self._offset += len(appended)
        complete, _, self._partial = (self._partial + data + appended).rpartition(b"\n")
        return [line for line in complete.decode().split("\n") if line.strip()]


def _read_from(path: Path, offset: int) -> bytes:
    """``path``'s bytes from ``offset`` on (none when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read()
    except FileNotFoundError:
        return b""
