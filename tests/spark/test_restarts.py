"""Which failures a query handle starts again, and after how long (``floodmark.spark.driver.restarts``)."""

from __future__ import annotations

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
