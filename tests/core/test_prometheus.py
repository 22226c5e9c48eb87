"""The Prometheus endpoint (``floodmark.driver.prometheus``): reports made by a real controller, scraped over HTTP
from 127.0.0.1 and parsed as Prometheus parses them (no Spark)."""

from __future__ import annotations

import json
import logging
import math
import urllib.error
import urllib.request

import pytest
from controller_rows import gauge_rows, stats, unread
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_STAGE, Controller, SourceSettings
from floodmark.driver.prometheus import PrometheusMetrics, lag_seconds, watermark_seconds

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(1_000).with_idleness(5_000)
T0 = 1_000_000


def scrape(metrics: PrometheusMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one scrape of ``metrics``' endpoint."""
    assert metrics.url is not None and metrics.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(metrics.url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name: str, query: str = "floodmark", **labels: str) -> float:
    return samples[(name, tuple(sorted({"query": query, **labels}.items())))]


def same(a, b) -> bool:
    """Equal scrapes or values, NaN equal to NaN."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return a == b or (math.isnan(a) and math.isnan(b))


def test_a_single_aggregation_scraped_over_http_with_a_replay_counted_once(tmp_path):
    clock = ManualClock(T0)
    ctl = Controller.of_aggregation(ControlLog(tmp_path), SourceSettings(STRATEGY, splits=("0", "1")), clock=clock)
    ctl.ensure_initial_entry()
    with PrometheusMetrics(port=0, host="127.0.0.1") as metrics:
        assert metrics.port and metrics.port > 0
        before = scrape(metrics)
        assert value(before, "floodmark_batches_total") == 0, "the counters exist before the first batch"

        clock.advance_to(T0 + 2_000)
        first = ctl.on_batch(
            0,
            [stats("0", 3, 10_000, 20_000), stats("1", 2, 5_000, 8_000), unread(1)],
            {AGGREGATION_STAGE: gauge_rows(0, T0 + 1_000, 2, 5)},
            {AGGREGATION_STAGE: {"PANE": 0, "LATE": 0, "BAD": 1}},
        )
        metrics(first)
        s = scrape(metrics)
        assert value(s, "floodmark_split_watermark_seconds", split="0") == 18.999  # 20 s - 1 s bound - 1 ms
        assert value(s, "floodmark_split_watermark_seconds", split="1") == 6.999
        assert value(s, "floodmark_split_idle", split="1") == 0
        assert math.isnan(value(s, "floodmark_split_unread", split="1")), "no engine said what it left unread"
        assert value(s, "floodmark_split_records_total", split="0") == 3
        stage = {"stage": AGGREGATION_STAGE}
        # The first batch ran with no watermark yet: NaN, not -9.2e15 s; so is the lag measured from it.
        assert math.isnan(value(s, "floodmark_stage_input_watermark_seconds", **stage))
        assert math.isnan(value(s, "floodmark_stage_output_watermark_seconds", **stage))
        assert math.isnan(value(s, "floodmark_stage_event_time_lag_seconds", **stage))
        assert value(s, "floodmark_stage_processing_time_lag_seconds", **stage) == 0  # pending since after it ran
        assert value(s, "floodmark_stage_open_windows", **stage) == 2
        assert value(s, "floodmark_stage_accepted_total", **stage) == 5
        assert value(s, "floodmark_stage_dead_letters_total", **stage) == 1
        assert value(s, "floodmark_batches_total") == 1
        assert value(s, "floodmark_input_rows_total") == 6  # 5 good records + 1 dead letter
        assert value(s, "floodmark_dead_letters_total") == 1
        assert value(s, "floodmark_last_batch_id") == 0
        assert value(s, "floodmark_last_batch_timestamp_seconds") == T0 / 1000

        # Batch 0 again (a replay after a failure): same batch id, nothing counted twice.
        replayed = ctl.on_batch(
            0,
            [stats("0", 3, 10_000, 20_000), stats("1", 2, 5_000, 8_000), unread(1)],
            {AGGREGATION_STAGE: gauge_rows(0, T0 + 1_000, 2, 5)},
            {AGGREGATION_STAGE: {"PANE": 0, "LATE": 0, "BAD": 1}},
        )
        assert replayed.batch_id == 0
        metrics(replayed)
        assert same(scrape(metrics), s)

        clock.advance_to(T0 + 10_000)
        second = ctl.on_batch(
            1,
            [stats("0", 4, 60_000, 70_000)],
            {AGGREGATION_STAGE: gauge_rows(60_000, T0 + 1_000, 1, 4)},
            {AGGREGATION_STAGE: {"PANE": 2, "LATE": 1, "BAD": 0}},
        )
        metrics(second)
        metrics(first)  # an older report arriving late changes nothing
        s = scrape(metrics)
        assert value(s, "floodmark_split_watermark_seconds", split="0") == 68.999
        assert value(s, "floodmark_split_idle", split="1") == 1  # no record for 5 s of processing time
        assert value(s, "floodmark_split_records_total", split="0") == 7
        assert value(s, "floodmark_split_records_total", split="1") == 2
        assert value(s, "floodmark_stage_input_watermark_seconds", **stage) == 6.999
        assert value(s, "floodmark_stage_output_watermark_seconds", **stage) == 6.999
        # The batch ran at T0 + 2 s: its output watermark trails that by T0 + 2 s - 6.999 s.
        assert value(s, "floodmark_stage_event_time_lag_seconds", **stage) == pytest.approx((T0 + 2_000 - 6_999) / 1000)
        assert value(s, "floodmark_stage_processing_time_lag_seconds", **stage) == 1.0  # pending since T0 + 1 s
        assert value(s, "floodmark_stage_open_windows", **stage) == 1
        assert value(s, "floodmark_stage_panes_total", **stage) == 2
        assert value(s, "floodmark_stage_late_records_total", **stage) == 1
        assert value(s, "floodmark_stage_accepted_total", **stage) == 9
        assert value(s, "floodmark_batches_total") == 2
        assert value(s, "floodmark_input_rows_total") == 10
        assert value(s, "floodmark_last_batch_id") == 1

        # The end of input: the stage's watermarks are MAX, exported as +Inf, and nothing is left to wait for.
        ctl.end_input()
        for batch_id in (2, 3):
            clock.advance_to(T0 + 10_000 + batch_id * 1_000)
            metrics(ctl.on_batch(batch_id, [], {AGGREGATION_STAGE: gauge_rows(None, None, 0, 0)}, {}))
        s = scrape(metrics)
        assert value(s, "floodmark_stage_input_watermark_seconds", **stage) == math.inf
        assert value(s, "floodmark_stage_output_watermark_seconds", **stage) == math.inf
        assert value(s, "floodmark_stage_event_time_lag_seconds", **stage) == 0
        assert value(s, "floodmark_stage_processing_time_lag_seconds", **stage) == 0
        assert value(s, "floodmark_batches_total") == 4
        assert value(s, "floodmark_last_batch_id") == 3
        port = metrics.port

    # Closed: the port is free (nothing answers; a new endpoint binds it) and later reports are ignored.
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    metrics(second)
    metrics.close()  # idempotent
    with PrometheusMetrics(port=port, query="again") as again:
        assert again.port == port
        assert value(scrape(again), "floodmark_batches_total", query="again") == 0


def test_a_pipeline_of_two_stages_exports_each_stage(tmp_path):
    clock = ManualClock(T0)
    ctl = Controller(ControlLog(tmp_path), {"src": SourceSettings(STRATEGY)}, {"a": ["src"], "b": ["a"]}, clock=clock)
    ctl.ensure_initial_entry()
    batches = [
        ([stats("0", 5, 10_000, 30_000)], {"a": gauge_rows(0, T0, 2, 5)}, {"a": {"PANE": 0}}),
        (
            [stats("0", 2, 70_000, 80_000)],
            {"a": gauge_rows(60_000, T0 + 1_000, 1, 2), "b": gauge_rows(0, T0 + 1_000, 1, 2)},
            {"a": {"PANE": 2, "LATE": 1}, "b": {"BAD": 1}},
        ),
        ([], {"b": gauge_rows(None, None, 0, 0)}, {"b": {"PANE": 1}}),
    ]
    with PrometheusMetrics(port=0, query="sessions") as metrics:
        for batch_id, (rows, gauges, counts) in enumerate(batches):
            clock.advance_to(T0 + (batch_id + 1) * 1_000)
            report = ctl.on_batch(batch_id, rows, gauges, counts)
            metrics(report)
        s = scrape(metrics)
    assert set(report.splits) == {"0"}, "one source: bare split labels"
    assert value(s, "floodmark_split_records_total", "sessions", split="0") == 7
    # Stage a holds its output watermark one below the 60 s it still owes b; b has had a's 28.999 s.
    expected = {
        "a": {"input_watermark": 78.999, "output_watermark": 59.999, "event_time_lag": (T0 + 2_000 - 59_999) / 1000},
        "b": {"input_watermark": 28.999, "output_watermark": 28.999, "event_time_lag": (T0 + 2_000 - 28_999) / 1000},
    }
    for name, values in expected.items():
        for metric, expected_value in values.items():
            assert value(s, f"floodmark_stage_{metric}_seconds", "sessions", stage=name) == pytest.approx(
                expected_value
            )
    assert value(s, "floodmark_stage_processing_time_lag_seconds", "sessions", stage="a") == 1.0
    assert value(s, "floodmark_stage_processing_time_lag_seconds", "sessions", stage="b") == 0.0
    totals = {"panes": (2, 1), "late_records": (1, 0), "dead_letters": (0, 1), "accepted": (7, 2)}
    for metric, (a, b) in totals.items():
        assert value(s, f"floodmark_stage_{metric}_total", "sessions", stage="a") == a, metric
        assert value(s, f"floodmark_stage_{metric}_total", "sessions", stage="b") == b, metric
    # Pane latency: once per batch in which the stage emitted panes, from its entry (1 s apart) to its end.
    for stage, batches in (("a", 1), ("b", 1)):
        assert value(s, "floodmark_stage_pane_latency_seconds_count", "sessions", stage=stage) == batches
        assert value(s, "floodmark_stage_pane_latency_seconds_sum", "sessions", stage=stage) == pytest.approx(1.0)
    latency_buckets = {"0.5": 0, "1.0": 1, "+Inf": 1}
    for bound, count in latency_buckets.items():
        assert value(s, "floodmark_stage_pane_latency_seconds_bucket", "sessions", stage="a", le=bound) == count
    assert value(s, "floodmark_stage_open_windows", "sessions", stage="a") == 1
    assert value(s, "floodmark_stage_open_windows", "sessions", stage="b") == 0
    assert value(s, "floodmark_dead_letters_total", "sessions") == 1
    # b's dead letter was a pane of a, not a row read: the input is a's 7 records.
    assert value(s, "floodmark_input_rows_total", "sessions") == 7
    assert value(s, "floodmark_batches_total", "sessions") == 3


def test_two_queries_in_one_process(tmp_path):
    """Each listener has its own registry and port by default; listeners sharing a registry need their own
    ``query`` label, and closing one removes only its series."""
    ctl = Controller.of_aggregation(ControlLog(tmp_path), SourceSettings(STRATEGY), clock=ManualClock(T0))
    ctl.ensure_initial_entry()
    report = ctl.on_batch(0, [stats("0", 3, 10_000, 20_000)], {}, {})
    with PrometheusMetrics(port=0) as one, PrometheusMetrics(port=0) as two:
        assert one.port != two.port
        one(report)
        assert value(scrape(one), "floodmark_batches_total") == 1
        assert value(scrape(two), "floodmark_batches_total") == 0
        assert value(scrape(one), "floodmark_restarts_total") == 0
        one.restarted()
        assert value(scrape(one), "floodmark_restarts_total") == 1
        assert value(scrape(two), "floodmark_restarts_total") == 0

    registry = CollectorRegistry()
    served = PrometheusMetrics(port=0, query="q1", registry=registry)
    unserved = PrometheusMetrics(port=None, query="q2", registry=registry)
    assert unserved.url is None
    with pytest.raises(ValueError, match="'q1'"):
        PrometheusMetrics(port=None, query="q1", registry=registry)
    unserved(report)
    s = scrape(served)
    assert value(s, "floodmark_batches_total", "q2") == 1 and value(s, "floodmark_batches_total", "q1") == 0
    unserved.close()
    s = scrape(served)
    assert not [key for key in s if ("query", "q2") in key[1]]
    assert value(s, "floodmark_batches_total", "q1") == 0
    PrometheusMetrics(port=None, query="q2", registry=registry).close()  # the label is free again
    served.close()


def test_a_port_in_use_is_an_error_and_a_broken_report_does_not_stop_the_query(caplog):
    registry = CollectorRegistry()
    with PrometheusMetrics(port=0, query="a", registry=registry) as metrics:
        with pytest.raises(OSError):
            PrometheusMetrics(port=metrics.port, query="b", registry=registry)
        PrometheusMetrics(port=None, query="b", registry=registry).close()  # the failed one released its label
        caplog.set_level(logging.WARNING, logger="floodmark.driver.prometheus")
        broken = type("Broken", (), {"batch_id": 5, "splits": None})()
        metrics(broken)  # logged, not raised: a listener's error would fail the batch
        assert "batch 5's metrics were not exported" in caplog.text


def test_the_extremes_are_not_exported_as_numbers():
    assert math.isnan(watermark_seconds(-(2**63))) and watermark_seconds(2**63 - 1) == math.inf
    assert watermark_seconds(1_500) == 1.5
    assert math.isnan(lag_seconds(10_000, -(2**63))) and lag_seconds(10_000, 2**63 - 1) == 0
    assert lag_seconds(10_000, 7_500) == 2.5


def test_a_batch_replayed_after_a_restart_is_reported_as_such_and_counted_once(tmp_path):
    """A driver that stopped after batch 0's report, before Spark committed it: the restarted driver (a new
    controller over the same control log, a new listener) runs batch 0 again. Its report says so; the new
    listener's counters and the metrics file count batch 0 once, the gauges show it; batch 1 counts."""
    batch = (
        [stats("0", 3, 10_000, 20_000)],
        {AGGREGATION_STAGE: gauge_rows(0, T0 + 1_000, 2, 5)},
        {AGGREGATION_STAGE: {"PANE": 1, "LATE": 0, "BAD": 1}},
    )
    metrics_file = tmp_path / "metrics.jsonl"

    def driver() -> Controller:
        clock = ManualClock(T0)
        controller = Controller.of_aggregation(
            ControlLog(tmp_path / "control"),
            SourceSettings(STRATEGY, splits=("0",)),
            clock=clock,
            metrics_path=metrics_file,
        )
        controller.ensure_initial_entry()
        clock.advance_to(T0 + 2_000)
        return controller

    first = driver().on_batch(0, *batch)
    assert not first.replayed
    restarted = driver()
    again = restarted.on_batch(0, *batch)
    assert again.replayed and (again.next_watermark, again.splits) == (first.next_watermark, first.splits)
    with PrometheusMetrics(port=0, host="127.0.0.1") as metrics:
        metrics(again)
        s = scrape(metrics)
        assert value(s, "floodmark_batches_total") == 0
        assert value(s, "floodmark_stage_panes_total", stage=AGGREGATION_STAGE) == 0
        assert value(s, "floodmark_last_batch_id") == 0
        assert value(s, "floodmark_split_watermark_seconds", split="0") == 18.999
        following = restarted.on_batch(1, [stats("0", 2, 30_000, 40_000)], *batch[1:])
        assert not following.replayed
        metrics(following)
        s = scrape(metrics)
        assert value(s, "floodmark_batches_total") == 1
        assert value(s, "floodmark_split_records_total", split="0") == 2
    assert [r.batch_id for r in restarted.reports] == [0, 1]
    assert [json.loads(line)["batch_id"] for line in metrics_file.read_text().splitlines()] == [0, 1]
