"""Extreme input on the core: the whole int64 timestamp range, huge, infinite and non-numeric values.

Issue 15: a record near the int64 edges used to get windows computed with wrapped arithmetic (start > end)
and crashed the Spark sink; integer sums could wrap. The rule now (``core/time.py``, ``core/assign.py``): event
times outside [EARLIEST_EVENT_TIME, LATEST_EVENT_TIME] and numeric inputs that are not finite numbers are bad
records with a reason; durations are at most MAX_DURATION; sums are IEEE doubles.
"""

import math
import sys
import warnings
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import aggregates, triggers, windows
from floodmark.core.assign import validate_numbers, validate_timestamps
from floodmark.core.combine import combine
from floodmark.core.emitted import Emitted
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_DURATION, MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.window import WindowOperator
from floodmark.testing import WindowHarness

EDGES = [MIN_TIMESTAMP, MIN_TIMESTAMP + 1, EARLIEST_EVENT_TIME - 1, EARLIEST_EVENT_TIME, -1, 0]
EDGES += [LATEST_EVENT_TIME, LATEST_EVENT_TIME + 1, 2**53, MAX_TIMESTAMP - 1, MAX_TIMESTAMP]

WINDOWS = [
    windows.Tumbling(60_000),
    windows.Tumbling(7, offset=3),
    windows.Tumbling(MAX_DURATION),
    windows.Sliding(120_000, 60_000),
    windows.Sliding(10, 3, offset=1),
    windows.Cumulate(60_000, 180_000),
    windows.Cumulate(MAX_DURATION // 4, MAX_DURATION // 4 * 4),
    windows.Sessions(60_000),
    windows.Global(),
]
AGGREGATE = {
    "n": aggregates.count(),
    "total": aggregates.sum("v"),
    "lo": aggregates.min("v"),
    "hi": aggregates.max("v"),
    "avg": aggregates.mean("v"),
}

timestamps = st.one_of(
    st.sampled_from(EDGES),
    st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP),
    st.integers(EARLIEST_EVENT_TIME, LATEST_EVENT_TIME),
    st.integers(-1000, 1000),
)
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 1.7976931348623157e308, 2**53 + 1, 2**63 - 1, -(2**63), 10**400]),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.sampled_from(["", "12.5", " 3 ", "abc", "inf", "NaN", "\u00e9", "1e999"]),
    st.booleans(),
)
watermarks = st.one_of(st.sampled_from(EDGES), st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP))
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.lists(st.tuples(st.sampled_from("ab"), timestamps, values), min_size=1, max_size=6)
        ),
        st.tuples(st.just("wm"), watermarks),
    ),
    min_size=1,
    max_size=12,
)

pytestmark = pytest.mark.usefixtures("both_operators")


def batch_of(records: list) -> RecordBatch:
    keys = np.array([k for k, _, _ in records], dtype=object)
    v = np.empty(len(records), dtype=object)
    v[:] = [value for _, _, value in records]
    return RecordBatch(keys, np.array([t for _, t, _ in records], dtype=np.int64), {"v": v, None: v}, payload=v)


class Combining(WindowOperator):
    """The map side as Spark runs it: combine() what can be combined, ship the rest as records."""

    def add(self, batch: RecordBatch) -> Emitted:
        partials, raw = combine(self.spec, self.watermark, batch)
        out = self.add_partials(partials)
        rest = RecordBatch(batch.keys[raw], batch.timestamps[raw], {c: v[raw] for c, v in batch.columns.items()})
        rest = RecordBatch(rest.keys, rest.timestamps, rest.columns, payload=batch.payload[raw])
        out.extend(super().add(rest))
        return out


def drive(operator, steps: list) -> tuple[list, list, list, int]:
    panes, late, bad, accepted = [], [], [], 0
    watermark = MIN_TIMESTAMP
    for kind, arg in steps:
        if kind == "add":
            out = operator.add(batch_of(arg))
        else:
            watermark = max(watermark, arg)
            out = operator.advance_watermark(watermark)
        panes += out.all_panes()
        late += out.late
        bad += out.bad
        accepted += out.accepted
    final = operator.advance_watermark(MAX_TIMESTAMP)
    assert operator.gauges().open_state == 0
    return panes + final.all_panes(), late, bad, accepted


def usable(ts: int, value) -> bool:
    if not EARLIEST_EVENT_TIME <= ts <= LATEST_EVENT_TIME:
        return False
    _numbers, bad, _reasons = validate_numbers("v", np.array([value, 0], dtype=object))
    return not bad[0]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(WINDOWS), st.sampled_from(["general", "columnar", "combining"]), st.sampled_from([0, 5]), ops)
def test_any_int64_timestamp_and_any_value_is_accounted_for(window, operator_name, lateness, steps):
    spec = WindowSpec(window, AGGREGATE, triggers.Default(), lateness)
    if operator_name != "general" and not spec.is_columnar:
        operator_name = "general"
    if operator_name == "combining" and not spec.combines_records:  # sessions merge in the operator only
        operator_name = "columnar"
    operator = Combining(spec) if operator_name == "combining" else WindowOperator(spec, policy=operator_name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning reaches a user's console
        panes, late, bad, accepted = drive(operator, steps)
    records = [r for kind, arg in steps if kind == "add" for r in arg]
    expected_bad = [r for r in records if not usable(r[1], r[2])]
    assert len(bad) == len(expected_bad)
    assert all(b.reason for b in bad)
    pairs = sum(len(window.assign_one(ts)) for _, ts, v in records if usable(ts, v))
    assert sum(p.value["n"] for p in panes) == accepted  # the reconciliation count runtimes report
    assert accepted + len(late) == pairs
    for pane in panes:
        w = pane.window
        assert w.start < w.end
        if window != windows.Global():
            assert w.start >= EARLIEST_EVENT_TIME - MAX_DURATION and w.end <= LATEST_EVENT_TIME + MAX_DURATION
            assert w.start <= pane.timestamp <= w.end - 1
        total = pane.value["total"]
        if total is None:
            # Partial sums that overflowed both ways (-inf + inf) add up to NaN, which a pane shows as null; in
            # another order the same values give -inf (IEEE addition is not associative, in Spark's sums too).
            assert sum(abs(v) for _, ts, v in records if usable(ts, v)) > sys.float_info.max
            continue
        assert isinstance(total, float), total  # a double, never a wrapped integer
        if pane.value["n"] and not math.isinf(total):
            assert pane.value["lo"] <= pane.value["hi"]


@pytest.mark.parametrize(
    "window", [windows.Tumbling(60_000), windows.Sliding(120_000, 60_000), windows.Cumulate(60_000, 120_000)], ids=repr
)
@pytest.mark.parametrize("operator", ["general", "columnar"])
@pytest.mark.parametrize("ts", [MIN_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_EVENT_TIME - 1, LATEST_EVENT_TIME + 1])
def test_the_issues_records_at_the_int64_edges_are_bad_records_not_wrapped_windows(window, operator, ts):
    h = WindowHarness(window=window, aggregate=aggregates.count(), policy=operator)
    h.add_elements([("x", ts)], key="k")
    h.advance_watermark_to(MAX_TIMESTAMP)
    assert h.panes == []
    assert [b.raw_timestamp for b in h.bad] == [ts]
    assert "outside the supported event-time range" in h.bad[0].reason


@pytest.mark.parametrize("ts", [EARLIEST_EVENT_TIME, LATEST_EVENT_TIME])
def test_the_first_and_last_supported_instants_get_windows(ts):
    h = WindowHarness(window=windows.Sliding(120_000, 60_000), aggregate=aggregates.count())
    h.add_elements([("x", ts)], key="k")
    h.advance_watermark_to(MAX_TIMESTAMP)
    assert [p.value for p in h.panes] == [1, 1]
    assert all(p.window.start <= ts < p.window.end for p in h.panes)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "missing timestamp"),
        (float("nan"), "missing timestamp"),
        ("12", "timestamp is not a number: '12'"),
        (1.5, "timestamp is not whole milliseconds: 1.5"),
        (2**64, "outside the supported event-time range"),
        (float(2**63), "outside the supported event-time range"),
        (LATEST_EVENT_TIME + 1, "outside the supported event-time range"),
        (LATEST_EVENT_TIME, None),
        (float(EARLIEST_EVENT_TIME), None),
    ],
)
def test_timestamp_validation_table(raw, reason):
    values, bad, reasons = validate_timestamps(np.array([raw, 0], dtype=object))
    assert list(bad) == [reason is not None, False]
    if reason is not None:
        assert reason in reasons[0]
    else:
        assert values[0] == int(raw)


@pytest.mark.parametrize(
    ("raw", "number", "reason"),
    [
        (3, 3.0, None),
        (True, 1.0, None),
        (" 4.5 ", 4.5, None),
        (Decimal("2.5"), 2.5, None),
        (2**63 - 1, float(2**63 - 1), None),
        (1e308, 1e308, None),
        (None, None, "field 'v' is missing"),
        (float("nan"), None, "field 'v' is missing"),
        ("NaN", None, "field 'v' is missing"),
        ("", None, "field 'v' is not a number: ''"),
        ("abc", None, "field 'v' is not a number: 'abc'"),
        ([1], None, "field 'v' is not a number: [1]"),
        (float("inf"), None, "field 'v' is not a finite number: inf"),
        ("-inf", None, "field 'v' is not a finite number: '-inf'"),
        ("1e999", None, "field 'v' is not a finite number: '1e999'"),
        (10**400, None, "field 'v' is not a finite number"),
    ],
)
def test_numeric_input_table(raw, number, reason):
    """What a numeric aggregate (sum, min, max, mean) takes: finite numbers; everything else is a bad record."""
    array = np.empty(1, dtype=object)
    array[0] = raw
    numbers, bad, messages = validate_numbers("v", array)
    reasons = [messages[0] if bad[0] else None]
    if reason is None:
        assert reasons[0] is None and numbers[0] == number
    else:
        assert reasons[0].startswith(reason) and math.isnan(numbers[0])
    floats = np.array([raw], dtype=np.float64) if isinstance(raw, float) else None
    if floats is not None:  # the vectorised path (Spark's float columns) says the same
        assert (validate_numbers("v", floats)[2] or [None])[0] == reasons[0]


@pytest.mark.parametrize("operator", ["general", "columnar"])
def test_sums_are_doubles_that_overflow_to_infinity_not_wrapped_integers(operator):
    h = WindowHarness(window=windows.Tumbling(10), aggregate=aggregates.sum(), policy=operator)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h.add_elements([(2**62, 1), (2**62, 2), (2**62, 3)], key="k")  # 3 * 2**62 wraps in int64
        h.add_elements([(1e308, 11), (1e308, 12)], key="k")
        h.advance_watermark_to(MAX_TIMESTAMP)
    assert [p.value for p in h.panes] == [3 * 2.0**62, math.inf]


@pytest.mark.parametrize(
    "make",
    [
        lambda: windows.Tumbling(MAX_DURATION + 1),
        lambda: windows.Sessions(MAX_DURATION + 1),
        lambda: windows.Sliding(MAX_DURATION + 1, 1000),
        lambda: windows.Cumulate(1000, MAX_DURATION + 1000),
        lambda: WindowSpec(windows.Tumbling(10), aggregates.count(), allowed_lateness=MAX_TIMESTAMP),
        lambda: triggers.AfterProcessingTime(2**62),
    ],
)
def test_durations_beyond_the_supported_range_are_refused(make):
    with pytest.raises(ValueError, match="must be at most"):
        make()


def test_a_slide_that_puts_a_record_in_too_many_windows_is_refused():
    with pytest.raises(ValueError, match="more than 100,000 windows"):
        windows.Sliding(86_400_000, 1)
