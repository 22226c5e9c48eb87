"""Which failures a query handle starts again, and after how long (``floodmark.spark.driver.restarts``)."""

from __future__ import annotations

import threading
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
    from floodmark.spark.driver.query import FloodmarkQuery, Launched

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
