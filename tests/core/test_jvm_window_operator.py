"""One semantics, two hosts: the JVM window operator (``floodmark.window`` in floodmark's jar, driven without Spark
through its plain entry point) against the Python core, the reference, on the same random streams.

Every spec the JVM host has built in (``floodmark.core.built_in_spec``): tumbling, sliding, cumulate and global
windows; every columnar trigger (early firings by count or processing time, late firings on every record or none,
``Never()``); allowed lateness; both accumulation modes; every timestamp combiner; count, sum, min, max and mean.
The streams carry timestamps at the edges of the event-time range, missing ones, NaN, infinite and missing values,
and the JVM operator is snapshotted and restored after every batch. Panes, late records, bad records and accepted
pairs must be identical after every move, and so must the gauges (output hold, oldest pending record, open windows)
and the deadlines (the next watermark and processing time at which something fires). Deferred partials
(``floodmark.core.segments``) are held equal too: both operators defer within the same small limits, and the JVM
one is restored from a head and a store of segments every other batch, as its Spark host stores them.
"""

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_properties import COLUMNAR_TRIGGERS, COLUMNAR_WINDOWS, NUMERIC_AGGREGATE, SESSION_TRIGGERS, batch_of

from floodmark import AccumulationMode, TimestampCombiner, aggregates, triggers, windows
from floodmark.core import segments
from floodmark.core.built_in_spec import built_in_form
from floodmark.core.combine import combine
from floodmark.core.emitted import Emitted
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, MAX_TIMESTAMP
from floodmark.core.window import WindowOperator, restore_operator

spec_strategy = st.builds(
    WindowSpec,
    st.sampled_from(COLUMNAR_WINDOWS),
    st.one_of(
        st.just(NUMERIC_AGGREGATE),
        st.sampled_from([aggregates.count(), aggregates.sum("v"), aggregates.min("v"), aggregates.mean("v")]),
    ),
    st.sampled_from(COLUMNAR_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.sampled_from(list(TimestampCombiner)),
).filter(lambda spec: built_in_form(spec) is not None)

deferring_spec = st.builds(
    WindowSpec,
    st.sampled_from(COLUMNAR_WINDOWS),
    st.sampled_from([NUMERIC_AGGREGATE, aggregates.sum("v"), aggregates.mean("v")]),
    st.sampled_from(COLUMNAR_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
).filter(lambda spec: spec.defers_partials)
"""Specs whose partials wait apart: no early firings, the end of the window as output time."""

EDGE_TIMES = [EARLIEST_EVENT_TIME, EARLIEST_EVENT_TIME - 1, LATEST_EVENT_TIME, LATEST_EVENT_TIME + 1]
record = st.tuples(
    st.sampled_from("abc"),
    st.one_of(st.integers(-5, 80), st.sampled_from(EDGE_TIMES), st.none()),
    st.one_of(
        st.integers(0, 10).map(float),
        st.sampled_from([math.nan, math.inf, -math.inf, None]),
    ),
)
move = st.one_of(
    st.tuples(st.just("add"), st.lists(record, min_size=1, max_size=6)),
    st.tuples(st.just("wm"), st.integers(0, 15)),
    st.tuples(st.just("pt"), st.integers(0, 6)),
)


def batch(records, first_id):
    """A batch of ``(key, ts, v)``; each record's value (its payload) is a unique id."""
    made = batch_of([(key, first_id + i, 0) for i, (key, _, _) in enumerate(records)])
    timestamps = np.empty(len(records), dtype=object)
    timestamps[:] = [ts for _, ts, _ in records]
    values = np.empty(len(records), dtype=object)
    values[:] = [v for _, _, v in records]
    made.columns["v"] = values
    return RecordBatch(made.keys, timestamps, made.columns)


def pane_form(p):
    value = tuple(sorted(p.value.items())) if isinstance(p.value, dict) else p.value
    return (str(p.key), p.window, p.pane_index, repr(value), p.timestamp, p.timing, p.nonspeculative_index, p.is_last)


def emitted_form(out):
    panes = sorted(map(pane_form, out.all_panes()))
    late = sorted((r.key, r.window, r.timestamp, r.value, r.reason, r.lateness, r.horizon) for r in out.late)
    bad = sorted((r.key, r.value, r.reason) for r in out.bad)
    return panes, late, bad, out.accepted


def gauges(operator):
    return (
        operator.gauges().hold,
        operator.gauges().oldest_pending,
        operator.gauges().open_state,
        operator.gauges().next_firing,
        operator.gauges().next_timer,
    )


def segment_infos(operator):
    """The core operator's segments as the JVM one reports them: level, rows, earliest end, oldest arrival."""
    segments_ = operator.policy.segments
    infos = segments_.infos if segments_ is not None else []
    return [(i.level, i.rows, i.first_end, i.oldest_arrival) for i in infos]


def combined(operator, records, ahead):
    """Add ``records`` (a :class:`RecordBatch`) as a map side would: cut in two "partitions", each combined
    (:func:`~floodmark.core.combine.combine`, with a watermark ``ahead`` of the operator's: that only keeps more
    records raw), the partials first, then the records left raw."""
    out, raws = Emitted(), []
    for half in np.array_split(np.arange(len(records)), 2):
        partials, raw = combine(operator.spec, operator.watermark + ahead, subset(records, half))
        out.extend(operator.add_partials(partials))
        raws.append(half[raw])
    out.extend(operator.add(subset(records, np.concatenate(raws))))
    return out


def subset(records, positions):
    columns = {name: values[positions] for name, values in records.columns.items()}
    return RecordBatch(records.keys[positions], records.timestamps[positions], columns)


def assert_same_on_both_hosts(jvm, spec, moves, ahead=None, deferred=None):
    """Both hosts after every move; with ``ahead`` (specs that combine records), the JVM operator takes each
    batch as partials and raw records; with ``deferred`` (``(defer_above, fanout)``), both operators defer partials
    within those limits and both take each batch as partials and raw records."""
    assert built_in_form(spec) is not None
    if deferred is None:
        python, java = WindowOperator(spec, -10), jvm.operator(spec, -10)
    else:
        python = WindowOperator(spec, -10, deferred=True, policy="columnar")
        java = jvm.operator(spec, -10, deferred=deferred)
    watermark, now, next_id = -10, 0, 0
    for kind, arg in [*moves, ("end", None)]:
        if kind == "add":
            records = batch(arg, next_id)
            # A spec changed on a restart may no longer combine records (early counts): the map side then sends them.
            combines = python.spec.combines_records
            both = [
                python.add(records) if deferred is None or not combines else combined(python, records, ahead),
                java.add(records) if ahead is None or not combines else combined(java, records, ahead),
            ]
            next_id += len(arg)
            java.roundtrip_apart() if deferred is not None and next_id % 2 else java.roundtrip()
        elif kind == "pt":
            now += arg
            both = [op.advance_processing_time(now) for op in (python, java)]
        elif kind == "restart":  # with changed settings (``arg``): both restored under the new spec
            python = restore_operator(arg, python.snapshot())
            java.roundtrip(arg) if deferred is None else java.roundtrip_apart(arg)
            both = [Emitted(), Emitted()]
        else:
            watermark = MAX_TIMESTAMP if kind == "end" else watermark + arg
            both = [op.advance_watermark(watermark) for op in (python, java)]
        assert emitted_form(both[1]) == emitted_form(both[0]), f"after {kind} {arg}"
        assert gauges(java) == gauges(python), f"gauges after {kind} {arg}"
        if deferred is not None:
            assert java.segment_infos() == segment_infos(python), f"segments after {kind} {arg}"
    assert java.gauges().open_state == 0, "everything is garbage collected at the end of input"
    java.drop()


@settings(max_examples=500, deadline=None)
@given(spec_strategy, st.lists(move, min_size=1, max_size=25))
def test_the_jvm_operator_equals_the_python_core(jvm, spec, moves):
    assert_same_on_both_hosts(jvm, spec, moves)


@settings(max_examples=300, deadline=None)
@given(
    spec_strategy,
    st.sampled_from(COLUMNAR_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.lists(move, min_size=1, max_size=12),
    st.lists(move, min_size=1, max_size=12),
)
def test_a_restart_with_another_trigger_or_lateness_is_the_same_on_the_jvm(jvm, spec, trigger, lateness, before, after):
    """The settings a restart keeps the state through (``floodmark.driver.definition_changes``): the trigger (a
    count lowered under a window's pending records included) and the allowed lateness, raised or lowered."""
    changed = WindowSpec(
        spec.window,
        spec.aggregate,
        trigger=trigger,
        allowed_lateness=lateness,
        accumulation=spec.accumulation,
        timestamp_combiner=spec.timestamp_combiner,
    )
    assume(built_in_form(changed) is not None)
    assert_same_on_both_hosts(jvm, spec, [*before, ("restart", changed), *after])


@settings(max_examples=300, deadline=None)
@given(
    spec_strategy.filter(lambda spec: spec.combines_records),
    st.lists(move, min_size=1, max_size=25),
    st.integers(0, 10),
)
def test_partials_from_the_map_side_give_the_same_panes_on_the_jvm(jvm, spec, moves, ahead):
    """The map side's partials (the Python combiner's), merged by the JVM operator, against every record added to
    the Python core."""
    assert_same_on_both_hosts(jvm, spec, moves, ahead)


@settings(max_examples=300, deadline=None)
@given(
    deferring_spec,
    st.lists(move, min_size=1, max_size=25),
    st.integers(0, 10),
    st.sampled_from([0, 4]),
    st.sampled_from([1, 2, segments.FANOUT]),
)
def test_deferred_partials_on_the_jvm_equal_the_python_core(jvm, spec, moves, ahead, defer_above, fanout):
    """Segments of deferred partials (made, compacted, cut where the watermark reached some of their windows and
    split by window end, merged before a record for an open window, stored apart and read back) give the same
    panes, late records and gauges, the open-window count's upper bound included, and the same segments: levels,
    rows, earliest ends and oldest arrivals."""
    with mock.patch.object(segments, "FANOUT", fanout), mock.patch.object(segments, "DEFER_ABOVE", defer_above):
        assert_same_on_both_hosts(jvm, spec, moves, ahead, deferred=(defer_above, fanout))


@settings(max_examples=200, deadline=None)
@given(
    deferring_spec,
    st.sampled_from(COLUMNAR_TRIGGERS),
    st.lists(move, min_size=1, max_size=15),
    st.lists(move, min_size=1, max_size=10),
    st.integers(0, 10),
)
def test_early_firings_added_on_a_restart_merge_the_deferred_partials_alike_on_the_jvm(
    jvm, spec, trigger, before, after, ahead
):
    """A stage whose partials wait apart restarted with early firings: both operators merge every segment into the
    table at the restore (the JVM one from its store, deleting what it stored) and go on alike."""
    changed = WindowSpec(
        spec.window,
        spec.aggregate,
        trigger=trigger,
        allowed_lateness=spec.allowed_lateness,
        accumulation=spec.accumulation,
        timestamp_combiner=spec.timestamp_combiner,
    )
    assume(built_in_form(changed) is not None and not changed.defers_partials)
    with mock.patch.object(segments, "FANOUT", 2), mock.patch.object(segments, "DEFER_ABOVE", 0):
        assert_same_on_both_hosts(jvm, spec, [*before, ("restart", changed), *after], ahead, deferred=(0, 2))


session_spec = st.builds(
    WindowSpec,
    st.sampled_from([windows.Sessions(3), windows.Sessions(5), windows.Sessions(12)]),
    st.just(NUMERIC_AGGREGATE),
    st.sampled_from(SESSION_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.sampled_from(list(TimestampCombiner)),
).filter(lambda spec: built_in_form(spec) is not None)
session_record = st.tuples(
    st.sampled_from("ab"),
    st.one_of(st.integers(-5, 40), st.sampled_from(EDGE_TIMES)),
    st.one_of(st.integers(0, 10).map(float), st.just(math.nan)),
)
session_move = st.one_of(
    st.tuples(st.just("add"), st.lists(session_record, min_size=1, max_size=8)),
    st.tuples(st.just("wm"), st.integers(0, 8)),
    st.tuples(st.just("pt"), st.integers(0, 6)),
)
"""Two keys and a narrow time range: records merge sessions, and late ones bridge fired or closed sessions."""


@settings(max_examples=500, deadline=None)
@given(session_spec, st.lists(session_move, min_size=1, max_size=25))
def test_sessions_on_the_jvm_equal_the_python_core(jvm, spec, moves):
    """Merging windows: a closed session refuses, then the merge (pane history restarts), then lateness on the
    merged window; late records that bridge sessions, every combiner and every trigger sessions run with."""
    assert_same_on_both_hosts(jvm, spec, moves)


def test_specs_without_a_built_in_form_stay_on_the_python_host():
    assert (
        built_in_form(
            WindowSpec(windows.Sessions(5), aggregates.count(), triggers.AfterWatermark(early=triggers.AfterCount(2)))
        )
        is None
    )
    assert built_in_form(WindowSpec(windows.Tumbling(10), aggregates.collect_list())) is None
    assert built_in_form(WindowSpec(windows.Tumbling(10), aggregates.count(), triggers.AfterCount(2))) is None
    assert built_in_form(WindowSpec(windows.Tumbling(10), aggregates.count())) is not None


def test_processing_time_windows_have_a_built_in_form_without_allowed_lateness():
    """Beam's processing-time windows (Nexmark q12): a global window fired every d ms by processing time. With
    allowed lateness a window would go on firing by processing time after the watermark reached it: general."""
    every_10s = triggers.Repeatedly(triggers.AfterProcessingTime(10_000))
    spec = WindowSpec(windows.Global(), aggregates.count(), every_10s, accumulation=AccumulationMode.DISCARDING)
    assert spec.is_columnar and spec.combines_records and not spec.defers_partials
    assert built_in_form(spec)["trigger"] == {
        "on_time": False,
        "late": "AT_HORIZON",
        "early_delay": 10_000,
        "early_count": None,
    }
    assert built_in_form(WindowSpec(windows.Tumbling(10), aggregates.count(), every_10s, 5)) is None
    assert built_in_form(WindowSpec(windows.Global(), aggregates.count(), triggers.AfterProcessingTime(10))) is None


def test_keys_of_any_length_survive_a_snapshot_on_the_jvm(jvm):
    """A key longer than the 64 KiB that Java's ``writeUTF`` takes comes back from a snapshot unchanged (in panes, as
    in the Python core)."""
    spec = WindowSpec(windows.Tumbling(10), aggregates.count())
    keys = ["é" * 40_000, "short"]
    python, java = WindowOperator(spec, -10), jvm.operator(spec, -10)
    records = batch([(key, ts, 1.0) for key, ts in zip(keys, [1, 2], strict=True)], 0)
    for operator in (python, java):
        operator.add(records)
    java.roundtrip()
    both = [operator.advance_watermark(MAX_TIMESTAMP) for operator in (python, java)]
    assert emitted_form(both[1]) == emitted_form(both[0])
    assert sorted(pane.key for pane in both[1].all_panes()) == sorted(keys)
    java.drop()


@pytest.mark.parametrize("field", ["fare", "driver's fare", 'the "net" fare', "Fahrpreis €", "値段"])
def test_a_bad_value_is_named_alike_on_the_jvm_whatever_the_field_name(jvm, field):
    """A record whose aggregate input is missing or not finite is a bad record with the same reason on both hosts:
    the reason names the field as the core does (``assign.field_label``, carried in the built-in form), quotes and
    non-ASCII names included."""
    spec = WindowSpec(windows.Tumbling(10), {"total": aggregates.sum(field), "rows": aggregates.count()})
    python, java = WindowOperator(spec, -10), jvm.operator(spec, -10)
    keys = np.array(["a", "a", "b"], dtype=object)
    values = np.array([1.0, math.nan, math.inf], dtype=object)
    records = RecordBatch(keys, np.array([1, 2, 3], dtype=object), {field: values, None: np.arange(3)})
    both = [operator.add(records) for operator in (python, java)]
    assert emitted_form(both[1]) == emitted_form(both[0])
    assert [r.reason for r in both[0].bad] == [
        f"field {field!r} is missing",
        f"field {field!r} is not a finite number: inf",
    ]
    java.drop()
