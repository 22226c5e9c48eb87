"""When an idle query runs its next batch (``floodmark.driver.next_batch``), as a table of cases."""

import pytest

from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats, WatermarkStrategy
from floodmark.driver.next_batch import HEARTBEAT, HEARTBEAT_MS, BucketGauges, next_batch

NOW = 100_000


def gauges(**stages):
    """``stage=[(bucket, hold, pending, open, next_fire, next_timer), ...]``."""
    memory = BucketGauges()
    for stage, rows in stages.items():
        memory.update(
            "" if stage == "single" else stage,
            [
                dict(
                    zip(
                        [
                            "fm_bucket",
                            "fm_hold",
                            "fm_oldest_pending",
                            "fm_open_windows",
                            "fm_next_fire",
                            "fm_next_timer",
                        ],
                        r,
                        strict=True,
                    )
                )
                for r in rows
            ],
        )
    return memory


def source(idle_ms=None, lagging_at=20_000):
    """Two splits: "a" at 50 s of event time, "b" behind at ``lagging_at``; records read at processing time 0."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(5_000)
    if idle_ms is not None:
        strategy = strategy.with_idleness(idle_ms)
    coordinator = SourceWatermarks(strategy, splits=["a", "b"], start_processing_time=0)
    coordinator.on_batch([SplitBatchStats("a", 3, 1_000, 50_000), SplitBatchStats("b", 1, 1_000, lagging_at)])
    coordinator.advance_processing_time(NOW)
    return coordinator


CASES = [
    # (name, bounded, watermark, processing time, gauges, sources, expected at (None: heartbeat))
    ("a bounded input runs every trigger", True, 0, NOW, gauges(), [], NOW),
    ("no window open: only the heartbeat", False, 0, NOW, gauges(single=[(0, None, None, 0, None, None)]), [], None),
    ("the watermark reached a window", False, 59_999, NOW, gauges(single=[(0, 1, NOW, 1, 59_999, None)]), [], NOW),
    (
        "one bucket of two reached",
        False,
        59_999,
        NOW,
        gauges(single=[(0, 1, 5, 1, 119_999, None), (1, 1, 5, 1, 59_999, None)]),
        [],
        NOW,
    ),
    ("an early pane is due", False, 0, NOW, gauges(single=[(0, 1, 90_000, 1, 59_999, NOW)]), [], NOW),
    ("an early pane later", False, 0, NOW, gauges(single=[(0, 1, 90_000, 1, 59_999, NOW + 700)]), [], NOW + 700),
    (
        "a split that never goes idle holds it",
        False,
        14_999,
        NOW,
        gauges(single=[(0, 1, 0, 1, 44_999, None)]),
        [source()],
        None,
    ),
    (
        "idleness lets it through",
        False,
        14_999,
        NOW,
        gauges(single=[(0, 1, 0, 1, 44_999, None)]),
        [source(idle_ms=30_000)],
        130_400,
    ),
]


@pytest.mark.parametrize(
    ("bounded", "watermark", "pt", "memory", "sources", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_next_batch(bounded, watermark, pt, memory, sources, expected):
    plan = next_batch(NOW, {"": watermark}, pt, memory, {"": sources}, bounded)
    assert plan.at == (NOW + HEARTBEAT_MS if expected is None else expected)
    assert plan.waits_for_input == (expected is None)


def test_the_idleness_wake_up_is_the_first_moment_the_watermark_reaches_the_window():
    """Brute force: advance a copy one periodic interval at a time (what one batch per trigger did)."""
    coordinator = source(idle_ms=7_000)
    plan = next_batch(
        NOW, {"": coordinator.watermark}, NOW, gauges(single=[(0, 1, 0, 1, 44_999, None)]), {"": [coordinator]}, False
    )
    twin, moment = coordinator.copy(), NOW
    twin.on_batch([])
    while twin.advance_processing_time(moment) < 44_999:
        moment += 200
    assert plan.at == moment and plan.reason != HEARTBEAT
    assert coordinator.watermark == 14_999, "the coordinator itself is left as it was"


def test_pipeline_stages_are_planned_each_on_its_own_watermark():
    memory = gauges(sessions=[(0, None, 5, 1, 59_999, None)], means=[(0, None, 5, 1, 119_999, None)])
    assert next_batch(NOW, {"sessions": 0, "means": 119_999}, NOW, memory, {}, False).at == NOW
    assert next_batch(NOW, {"sessions": 0, "means": 0}, NOW, memory, {}, False).waits_for_input


def test_buckets_that_did_not_run_keep_what_they_reported():
    memory = gauges(single=[(0, 10, 1, 2, 59_999, None), (1, 20, 2, 3, 119_999, None)])
    memory.update("", [{"fm_bucket": 1, "fm_hold": None, "fm_oldest_pending": None, "fm_open_windows": 0}])
    restored = BucketGauges(memory.snapshot())
    assert restored.values("", "fm_hold") == [10]
    assert restored.total("", "fm_open_windows") == 2
    assert restored.lowest("", "fm_next_fire") == 59_999
    assert restored.lowest("other", "fm_hold") is None


BUCKETS = gauges(single=[(0, 1, 0, 1, 59_999, None), (1, 1, 0, 1, 119_999, 90_000), (2, None, None, 0, None, None)])

DUE_CASES = [
    # (name, bucket (None: any of the stage's), watermark, processing time, due)
    ("below every deadline", None, 59_998, 89_999, False),
    ("the lowest watermark deadline", None, 59_999, 0, True),
    ("bucket 0's own deadline", 0, 59_999, 0, True),
    ("not bucket 1's", 1, 59_999, 0, False),
    ("bucket 1's processing-time deadline", 1, 0, 90_000, True),
    ("bucket 0 has no timer", 0, 0, 10**12, False),
    ("a bucket without windows never is", 2, 2**63 - 1, 10**12, False),
    ("a bucket that never reported has no deadline", 7, 2**63 - 1, 10**12, False),
]


@pytest.mark.parametrize(
    ("bucket", "watermark", "pt", "due"), [c[1:] for c in DUE_CASES], ids=[c[0] for c in DUE_CASES]
)
def test_a_batch_is_due_for_a_bucket_from_its_last_report(bucket, watermark, pt, due):
    assert (BUCKETS.due("", watermark, pt, bucket) is not None) == due
    assert bucket is None or BUCKETS.reported("", bucket) == (bucket in (0, 1, 2))


def test_nothing_runs_after_the_end_of_input_has_reached_every_stage():
    """A bounded run asks for a batch at every trigger until its flush; after it nothing can fire."""
    memory = gauges(single=[(0, None, 5, 1, 59_999, NOW)])
    assert next_batch(NOW, {"": MAX_TIMESTAMP}, NOW, memory, {}, bounded=True).at == NOW
    flushed = next_batch(NOW, {"": MAX_TIMESTAMP}, NOW, memory, {}, bounded=True, flushed=True)
    assert flushed.waits_for_input and flushed.at == NOW + HEARTBEAT_MS


def test_a_stage_waits_for_the_source_that_is_behind_not_the_one_ahead():
    """A join reads two sources: one is past the join's deadline, the other behind it and not idle. Nothing can fire
    until input comes (an interval join asked for a batch per trigger at an unchanged watermark)."""
    ahead, behind = source(lagging_at=60_000), source()  # watermarks 44_999 and 14_999
    memory = gauges(join=[(0, 1, 0, 1, 30_000, None)])
    plan = next_batch(NOW, {"join": 14_999}, NOW, memory, {"join": [ahead, behind]}, False)
    assert plan.waits_for_input
    idle_later = source(idle_ms=7_000)
    plan = next_batch(NOW, {"join": 14_999}, NOW, memory, {"join": [ahead, idle_later]}, False)
    assert not plan.waits_for_input and NOW + 7_000 <= plan.at < NOW + HEARTBEAT_MS, "once the split behind is idle"


def test_a_stage_held_back_by_an_upstream_stage_waits_for_that_stage():
    """Every source past the deadline, the stage's input watermark behind it: an upstream stage's hold holds it,
    and that stage's own deadline wakes the query; this stage asks for nothing."""
    memory = gauges(means=[(0, None, 5, 1, 30_000, None)])
    ahead = source(lagging_at=60_000)
    assert next_batch(NOW, {"means": 10_000}, NOW, memory, {"means": [ahead]}, False).waits_for_input
