"""When a query handle starts its failed query again from the checkpoint, and after how long.

Spark stops a streaming query at the first batch that fails; it has no restart strategy of its own. A failure
that says the machine was busy or that an outside system was out of reach is not the query's fault, and a
restart from the checkpoint is exactly-once (the failed batch runs again; sinks replace or skip what its first
attempt wrote), so the handle (:class:`~floodmark.spark.driver.query.FloodmarkQuery`) starts it again. Any other
failure stops the query, and the handle raises floodmark's one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
_LOG = logging.getLogger("floodmark")

BUSY_MACHINE = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
"""Errors that say the machine was too busy, not that the query is wrong: a Python worker Spark started did not
connect back within Spark's fixed 10 s (``PythonWorkerFactory``; at a query's start, the driver-side worker of
``transformWithStateInPandas``). No setting reaches that wait, so the handle starts the query again at once, up
to :data:`BUSY_MACHINE_RESTARTS` times in a row."""

BUSY_MACHINE_RESTARTS = 3

OUT_OF_REACH = (
    "org.apache.kafka.common.errors.TimeoutException",
    "org.apache.kafka.common.errors.NetworkException",
    "org.apache.kafka.common.errors.DisconnectException",
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException",
    "org.apache.kafka.common.errors.LeaderNotAvailableException",
    "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
    "org.apache.kafka.common.errors.NotCoordinatorException",
    "org.apache.kafka.common.errors.CoordinatorLoadInProgressException",
    "Cannot fetch record for offset",
)
"""Errors that say a Kafka broker did not answer within its clients' timeouts (a broker down, restarting or
electing a leader): Kafka's own retriable exceptions (``org.apache.kafka.common.errors.RetriableException``'s
subclasses that mean "not reachable now"; not ``UnknownTopicOrPartitionException``, which a typo also raises),
as the exactly-once sink, Spark's Kafka source on the driver and Spark's Kafka reader on an executor ("Cannot
fetch record for offset ... in ... milliseconds") report them. Wrong credentials, certificates or topics are
not among them: those stop the query at once."""


@dataclass(frozen=True)
class Restarts:
    """How a handle rides through an outside system out of reach (:data:`OUT_OF_REACH`), as Flink's
    exponential-delay restart strategy does (its defaults since Flink 1.19: 1 s, x1.5, at most 1 min).

    The ``n``-th restart in a row waits ``min(max_delay_s, initial_delay_s * multiplier ** (n - 1))`` seconds,
    then starts the query again from its checkpoint; after ``attempts`` restarts in a row the next failure stops
    the query (the handle raises floodmark's one line). A batch that completes ends the row. With the defaults
    the waits are 1, 1.5, 2.3, 3.4, 5.1, 7.6, 11.4, 17.1, 25.6 and 38.4 s (113 s in all), and each attempt also
    spends the clients' own timeouts (Kafka's ``max.block.ms``, 60 s by default, for the exactly-once sink):
    about 12 minutes of outage at Kafka's default timeouts. ``Restarts(attempts=0)``: never restart for an
    outage. A busy machine (:data:`BUSY_MACHINE`) is restarted at once whatever this says.

    :arg attempts: restarts in a row (>= 0). :arg initial_delay_s: the first wait, seconds (>= 0).
    :arg max_delay_s: the longest wait, seconds (>= ``initial_delay_s``). :arg multiplier: >= 1.
    """

    attempts: int = 10
    initial_delay_s: float = 1.0
    max_delay_s: float = 60.0
    multiplier: float = 1.5

    def __post_init__(self) -> None:
        if self.attempts < 0:
            raise ValueError(f"attempts must be >= 0, not {self.attempts}")
        if not 0 <= self.initial_delay_s <= self.max_delay_s:
            raise ValueError(
                f"the delays must be 0 <= initial_delay_s <= max_delay_s, not {self.initial_delay_s} and "
                f"{self.max_delay_s}"
            )
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, not {self.multiplier}")

    def decide(self, error: object, in_a_row: int) -> Restart | None:
        """Whether and when to start the query again after ``error``, when ``in_a_row`` restarts came right before
        it (no batch completed since); None: do not."""
        text = str(error)
        if any(line in text for line in BUSY_MACHINE):
            return Restart(0.0, "a busy machine?", BUSY_MACHINE_RESTARTS) if in_a_row < BUSY_MACHINE_RESTARTS else None
        if any(name in text for name in OUT_OF_REACH) and in_a_row < self.attempts:
            delay = min(self.max_delay_s, self.initial_delay_s * self.multiplier**in_a_row)
            return Restart(delay, "Kafka out of reach?", self.attempts)
        return None


@dataclass(frozen=True)
class Restart:
    """One restart the handle makes: after ``delay_s`` seconds, ``why`` (said in its log line), one of at most
    ``limit`` in a row."""

    delay_s: float
    why: str
    limit: int


@dataclass(frozen=True)
class RestartUnderWay:
    """A restart the handle is making: after the query failed with ``cause`` (floodmark's line), the
    ``attempt``-th of at most ``limit`` in a row (``why`` said), starting the query again at ``starts_at``
    (``time.monotonic()``). While it is under way the floodmark query is running: the handle's ``isActive`` is
    True, its ``exception()`` None and its ``status`` :meth:`status`."""

    cause: str
    why: str
    attempt: int
    limit: int
    starts_at: float

    def message(self, now: float) -> str:
        """``restarting after <cause> (<why>): attempt 2 of 10 in 1.5 s`` (``..., starting the query`` once the
        delay is over)."""
        left = self.starts_at - now
        when = f" in {left:.1f} s" if left >= 0.05 else ", starting the query"
        return f"restarting after {self.cause} ({self.why}): attempt {self.attempt} of {self.limit}{when}"

    def status(self, now: float) -> dict[str, object]:
        """PySpark's ``StreamingQuery.status`` of the query while it restarts: no data to read, no trigger."""
        return {"message": self.message(now), "isDataAvailable": False, "isTriggerActive": False}


def start_again_when_busy(start: Callable[[], T]) -> T:
    """``start()`` (a query's start), made again at once when it fails because a Python process Spark started did
    not connect back in time (:data:`BUSY_MACHINE`), up to
    :data:`BUSY_MACHINE_RESTARTS` times in a row, saying so in one line each
    time: what the query handle does for a running query that fails so.

    Over Spark Connect the server starts the query's ``foreachBatch`` Python process inside ``start()``, before
    the query exists, and fails the start when that process misses Spark's fixed 10 s to connect back (a busy
    server); nothing of the query has run then, so starting it again is safe. A classic session starts its
    Python workers after ``start()`` has returned: their failures reach the handle's watcher instead.
    """
    attempt = 0
    while True:
        try:
            return start()
        except Exception as error:
            text = str(error)
            busy = next((line for line in BUSY_MACHINE if line in text), None)
            if busy is None or attempt >= BUSY_MACHINE_RESTARTS:
                raise
            attempt += 1
            _LOG.warning(
                "floodmark: %s at the query's start (a busy machine?): starting it again (%d of %d)",
                busy,
                attempt,
                BUSY_MACHINE_RESTARTS,
            )
