"""Which failures a query handle starts again, and after how long (``floodmark.spark.driver.restarts``)."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from floodmark.spark import Restarts
from floodmark.spark.driver.restarts import BUSY_MACHINE_RESTARTS

KAFKA_TIMEOUT = (
    "floodmark batch 4 failed while writing its panes output to KafkaSink(...): "
    "org.apache.kafka.common.errors.TimeoutException: Timeout expired after 60000ms while awaiting AddOffsetsToTxn."
)


def test_an_outage_waits_longer_at_each_restart_in_a_row_up_to_the_limit():
    restarts = Restarts()
    delays = [restarts.decide(KAFKA_TIMEOUT, n).delay_s for n in range(restarts.attempts)]
    assert delays == pytest.approx(
        [1.0, 1.5, 2.25, 3.375, 5.0625, 7.59375, 11.390625, 17.0859375, 25.62890625, 38.443359375]
    )
    assert sum(delays) == pytest.approx(113.4, abs=0.1), "the docstring's arithmetic"
    assert restarts.decide(KAFKA_TIMEOUT, restarts.attempts) is None, "then the next failure stops the query"
    capped = Restarts(attempts=30, max_delay_s=60.0)
    assert capped.decide(KAFKA_TIMEOUT, 29).delay_s == 60.0
    assert Restarts(attempts=0).decide(KAFKA_TIMEOUT, 0) is None


def test_a_busy_machine_restarts_at_once_and_other_failures_never():
    busy = "org.apache.spark.SparkException: Python worker failed to connect back."
    assert Restarts(attempts=0).decide(busy, 0).delay_s == 0.0
    assert Restarts().decide(busy, BUSY_MACHINE_RESTARTS) is None
    for error in (
        "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed",
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic",
        "floodmark batch 3 failed while writing its panes output: No space left on device",
    ):
        assert Restarts().decide(error, 0) is None, error


def test_a_policy_that_cannot_work_is_refused():
    with pytest.raises(ValueError, match="attempts"):
        Restarts(attempts=-1)
    with pytest.raises(ValueError, match="initial_delay_s <= max_delay_s"):
        Restarts(initial_delay_s=10, max_delay_s=1)
    with pytest.raises(ValueError, match="multiplier"):
        Restarts(multiplier=0.5)


class QueryFailingAtFirstLook:
    """A stand-in for Spark's ``StreamingQuery`` that fails right after the handle's first ``exception()`` call
    has answered None: the moment a real query can fail at, which no real one can be made to hit on purpose."""

    def __init__(self, error: str | None) -> None:
        self.error = error
        self.ended = threading.Event()
        self.looked = False

    def exception(self) -> str | None:
        if not self.looked:
            self.looked = True
            if self.error is not None:
                self.ended.set()
            return None
        return self.error if self.ended.is_set() else None

    def awaitTermination(self) -> None:
        self.ended.wait()

    @property
    def isActive(self) -> bool:
        return not self.ended.is_set()

    def stop(self) -> None:
        self.ended.set()


def test_a_query_failing_between_two_looks_of_the_handle_is_started_again_not_raised():
    """The handle reads a query's error once per decision: a failure after that read is left to the watcher,
    which starts the query again, instead of being raised by a second read (the flake of a broker outage test)."""
    from floodmark.spark.driver.launch import Launched
    from floodmark.spark.driver.query import FloodmarkQuery

    controller = SimpleNamespace(batches_reported=0)
    first, second = QueryFailingAtFirstLook(KAFKA_TIMEOUT), QueryFailingAtFirstLook(None)
    handle = FloodmarkQuery(
        Launched(first, controller, None, {}),
        {},
        {},
        None,
        relaunch=lambda earlier: Launched(second, earlier, None, {}),
        restart_policy=Restarts(initial_delay_s=0.5),
    )
    try:
        handle._check()  # the query fails right after this look: not raised here
        assert first.ended.is_set()
        handle._check()  # waits while the watcher starts it again
        assert handle.query is second and handle.restarts == 1
    finally:
        handle.stop()


class FakeQuery:
    """A stand-in for Spark's ``StreamingQuery`` that runs until the test fails or stops it."""

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.error: str | None = None
        self.waiting = threading.Event()

    def fail(self, error: str) -> None:
        self.error = error
        self.ended.set()

    def exception(self) -> str | None:
        return self.error if self.ended.is_set() else None

    def awaitTermination(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return self.ended.wait(timeout)

    @property
    def isActive(self) -> bool:
        return not self.ended.is_set()

    @property
    def status(self) -> dict:
        return {"message": "Waiting for next trigger", "isDataAvailable": False, "isTriggerActive": False}

    def stop(self) -> None:
        self.ended.set()


def eventually(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.01)


def handle_of(query: FakeQuery, relaunch=None, policy: Restarts | None = None):
    from floodmark.spark.driver.launch import Launched
    from floodmark.spark.driver.query import FloodmarkQuery

    launched = Launched(query, SimpleNamespace(batches_reported=0), None, {})
    return FloodmarkQuery(
        launched, {}, {}, None, relaunch=relaunch or (lambda earlier: launched), restart_policy=policy
    )


def test_a_query_the_handle_starts_again_is_active_and_says_so_until_the_handle_gives_up():
    from floodmark.spark.driver.launch import Launched

    first, second = FakeQuery(), FakeQuery()
    starting, go = threading.Event(), threading.Event()

    def relaunch(earlier):
        starting.set()
        go.wait(10)
        return Launched(second, earlier, None, {})

    handle = handle_of(first, relaunch, Restarts(attempts=1, initial_delay_s=0.5))
    cause = KAFKA_TIMEOUT.rstrip(".") + " (Kafka out of reach?)"
    try:
        assert handle.isActive and handle.status["message"] == "Waiting for next trigger"
        first.fail(KAFKA_TIMEOUT)  # the handle says so at once, whether or not its watcher has seen it yet
        assert handle.isActive and handle.exception() is None
        assert re.fullmatch(
            rf"restarting after {re.escape(cause)}: attempt 1 of 1 in 0\.[1-5] s", handle.status["message"]
        )
        assert starting.wait(10)  # the delay is over: the query starts
        assert handle.status == {
            "message": f"restarting after {cause}: attempt 1 of 1, starting the query",
            "isDataAvailable": False,
            "isTriggerActive": False,
        }
        assert handle.awaitTermination(0.2) is False, "a query being started again has not stopped"
        go.set()
        eventually(lambda: handle.query is second)
        assert handle.isActive and handle.exception() is None and handle.status["message"] == "Waiting for next trigger"
        second.fail(KAFKA_TIMEOUT)  # the one restart in a row is spent: the handle gives up
        eventually(lambda: not handle.isActive)
        assert handle.exception() == KAFKA_TIMEOUT and handle.status["message"] == "Waiting for next trigger"
        with pytest.raises(RuntimeError, match="the floodmark query failed: floodmark batch 4 failed while writing"):
            handle.awaitTermination()
    finally:
        go.set()
        handle.stop()


def test_a_failure_the_handle_does_not_restart_after_ends_the_query_at_once():
    query = FakeQuery()
    handle = handle_of(query, policy=Restarts())
    try:
        query.fail("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed")
        assert not handle.isActive and "SaslAuthenticationException" in handle.exception()
        assert handle.status["message"] == "Waiting for next trigger"
    finally:
        handle.stop()


def test_ctrl_c_in_await_termination_stops_the_query_and_raises_keyboard_interrupt(caplog):
    query = FakeQuery()
    handle = handle_of(query)
    handler = signal.getsignal(signal.SIGINT)

    def press_ctrl_c() -> None:
        query.waiting.wait(10)  # the wait is under way (in the JVM, through py4j, for a real query)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with caplog.at_level(logging.WARNING, logger="floodmark"), pytest.raises(KeyboardInterrupt):
        handle.awaitTermination()
    assert query.ended.is_set() and not handle.isActive and handle.exception() is None, "stopped"
    assert signal.getsignal(signal.SIGINT) is handler, "SIGINT's handler is the program's again"
    assert [r.getMessage() for r in caplog.records] == [
        "floodmark: interrupted: stopping the query (starting it again from its checkpoint resumes it)"
    ]
