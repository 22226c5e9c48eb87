"""Property tests on random streams (hypothesis)."""

from collections import Counter

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from floodmark import AccumulationMode, LateReason, WatermarkStrategy, aggregates, triggers, windows
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats
from floodmark.core.window import WindowOperator, restore_operator

WINDOWS = [
    windows.Tumbling(10),
    windows.Tumbling(7, offset=3),
    windows.Sliding(10, 5),
    windows.Sliding(9, 4),
    windows.Cumulate(4, 12, offset=1),
    windows.Sessions(5),
]
TRIGGERS = [
    triggers.Default(),
    triggers.AfterWatermark(),
    triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(5), late=triggers.AfterCount(2)),
    triggers.Repeatedly(triggers.AfterCount(3)),
    triggers.AfterCount(2),
    triggers.Never(),
    triggers.OrFinally(triggers.Repeatedly(triggers.AfterCount(2)), triggers.AfterWatermark()),
    triggers.AfterEach(triggers.AfterCount(2), triggers.AfterWatermark()),
    triggers.Repeatedly(triggers.AfterAny(triggers.AfterCount(4), triggers.AfterProcessingTime(3))),
    triggers.AfterAll(triggers.AfterCount(2), triggers.AfterWatermark()),
]

op = st.one_of(
    st.tuples(
        st.just("add"),
        st.lists(st.tuples(st.sampled_from("abc"), st.integers(-5, 80)), min_size=1, max_size=6),
    ),
    st.tuples(st.just("wm"), st.integers(0, 15)),
    st.tuples(st.just("pt"), st.integers(0, 6)),
)
scenario = st.tuples(
    st.sampled_from(WINDOWS),
    st.sampled_from(TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.lists(op, min_size=1, max_size=25),
)


def numbered(ops):
    """Give every record a unique id (its value); returns ops with (key, id, ts) records."""
    out, next_id = [], 0
    for kind, arg in ops:
        if kind == "add":
            records = []
            for key, ts in arg:
                records.append((key, next_id, ts))
                next_id += 1
            out.append(("add", records))
        else:
            out.append((kind, arg))
    return out


def batch_of(records):
    keys = np.empty(len(records), dtype=object)
    keys[:] = [k for k, _, _ in records]
    values = np.empty(len(records), dtype=object)
    values[:] = [i for _, i, _ in records]
    return RecordBatch(keys, np.array([t for _, _, t in records], dtype=np.int64), {None: values})


def run(spec, ops, start_watermark=-10, operator=None, make_batch=batch_of, roundtrip=False):
    """Drive an operator through ``ops`` then to the end of input; returns (panes, late records).

    :arg roundtrip: snapshot and restore the operator after every batch of records.
    """
    operator = operator or WindowOperator(spec, watermark=start_watermark, policy="general")
    panes, late = [], []
    watermark, now = start_watermark, 0
    for kind, arg in ops:
        if kind == "add":
            emitted = operator.add(make_batch(arg))
        elif kind == "wm":
            watermark += arg
            emitted = operator.advance_watermark(watermark)
        else:
            now += arg
            emitted = operator.advance_processing_time(now)
        panes += emitted.all_panes()
        late += emitted.late
        if kind == "add" and roundtrip:
            operator = restore_operator(spec, operator.snapshot())
    final = operator.advance_watermark(MAX_TIMESTAMP)
    assert operator.gauges().open_state == 0, "everything is garbage collected at the end of input"
    return panes + final.all_panes(), late


def make_spec(window, trigger, lateness, mode):
    return WindowSpec(window, aggregates.collect_list(), trigger, lateness, mode)


def pane_key(p):
    return (p.key, p.window, tuple(p.value), p.timestamp, p.timing, p.pane_index, p.nonspeculative_index, p.is_last)


@settings(max_examples=200, deadline=None)
@given(scenario)
def test_every_record_ends_exactly_once_per_window(case):
    window, trigger, lateness, raw_ops = case
    ops = numbered(raw_ops)
    panes, late = run(make_spec(window, trigger, lateness, AccumulationMode.DISCARDING), ops)
    records = [r for kind, arg in ops if kind == "add" for r in arg]
    in_panes = Counter((p.key, p.window, i) for p in panes for i in p.value)
    in_late = Counter((r.key, r.window, r.value) for r in late)
    if window.is_merging:
        # A record's session is decided by merging; count it once wherever it ended.
        per_record = Counter(i for (_, _, i) in in_panes.elements()) + Counter(i for (_, _, i) in in_late.elements())
        assert all(per_record[i] == 1 for _, i, _ in records), per_record
        assert sum(per_record.values()) == len(records)
        return
    for key, ident, ts in records:
        for w in window.assign_one(ts):
            assert in_panes[(key, w, ident)] + in_late[(key, w, ident)] == 1, (key, ident, ts, w)
    expected_pairs = sum(len(window.assign_one(ts)) for _, _, ts in records)
    assert sum(in_panes.values()) + sum(in_late.values()) == expected_pairs


@settings(max_examples=200, deadline=None)
@given(scenario.filter(lambda c: not c[0].is_merging))
def test_discarding_panes_add_up_to_the_final_accumulating_pane(case):
    window, trigger, lateness, raw_ops = case
    ops = numbered(raw_ops)
    discarding, late_d = run(make_spec(window, trigger, lateness, AccumulationMode.DISCARDING), ops)
    accumulating, late_a = run(make_spec(window, trigger, lateness, AccumulationMode.ACCUMULATING), ops)
    assert [(r.key, r.window, r.value, r.reason) for r in late_d] == [
        (r.key, r.window, r.value, r.reason) for r in late_a
    ]
    summed: dict = {}
    for p in discarding:
        summed.setdefault((p.key, p.window), []).extend(p.value)
    last: dict = {}
    for p in accumulating:
        last[(p.key, p.window)] = p.value
    assert summed == last
    assert [(p.key, p.window, p.timing, p.pane_index) for p in discarding] == [
        (p.key, p.window, p.timing, p.pane_index) for p in accumulating
    ]


def rebatch(ops, how):
    """Same records, same order, different batch boundaries."""
    out = []
    for kind, arg in ops:
        if kind != "add":
            out.append((kind, arg))
        elif how == "split":
            out.extend(("add", [record]) for record in arg)
        elif out and out[-1][0] == "add":
            out[-1] = ("add", out[-1][1] + arg)
        else:
            out.append(("add", list(arg)))
    return out


@settings(max_examples=200, deadline=None)
@given(scenario, st.sampled_from(list(AccumulationMode)))
def test_panes_do_not_depend_on_batch_boundaries(case, mode):
    window, trigger, lateness, raw_ops = case
    ops = numbered(raw_ops)
    spec = make_spec(window, trigger, lateness, mode)
    baseline_panes, baseline_late = run(spec, ops)
    for how in ("split", "join"):
        panes, late = run(spec, rebatch(ops, how))
        assert sorted(map(pane_key, panes)) == sorted(map(pane_key, baseline_panes))
        assert sorted((r.key, r.window, r.value, r.reason) for r in late) == sorted(
            (r.key, r.window, r.value, r.reason) for r in baseline_late
        )


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(
        [
            WatermarkStrategy.for_bounded_out_of_orderness(20),
            WatermarkStrategy.for_bounded_out_of_orderness(5).with_idleness(300),
            WatermarkStrategy.for_idle_advancing(10, 200, 100),
            WatermarkStrategy.for_idle_advancing(10, 200, 100).with_idleness(500),
            WatermarkStrategy.for_legacy_bounded_out_of_orderness(7),
            WatermarkStrategy.for_monotonous_timestamps(),
        ]
    ),
    st.sampled_from([100.0, 50.0]),
    st.lists(
        st.one_of(
            st.tuples(st.just("event"), st.sampled_from("xyz"), st.integers(0, 5_000)),
            st.tuples(st.just("batch"), st.sampled_from("xyz"), st.integers(0, 5_000)),
            st.tuples(st.just("time"), st.just(""), st.integers(0, 700)),
        ),
        max_size=40,
    ),
)
def test_watermarks_never_regress(strategy, percentile, ops):
    source = SourceWatermarks(strategy, periodic_interval=100, percentile=percentile)
    now = 0
    seen = [source.watermark]
    split_seen: dict = {}
    for kind, split, value in ops:
        if kind == "event":
            source.on_event(split, None, value)
        elif kind == "batch":
            source.on_batch([SplitBatchStats(split, 2, max(0, value - 50), value)])
        else:
            now += value
            source.advance_processing_time(now)
        seen.append(source.watermark)
        for s, (wm, _) in source.split_watermarks().items():
            assert wm >= split_seen.get(s, wm)
            split_seen[s] = wm
    assert seen == sorted(seen)


def test_late_reasons_cover_closed_and_expired():
    spec = make_spec(windows.Tumbling(10), triggers.AfterWatermark(), 5, AccumulationMode.DISCARDING)
    _, late = run(
        spec, numbered([("add", [("a", 1)]), ("wm", 20), ("add", [("a", 2)]), ("wm", 10), ("add", [("a", 3)])])
    )
    assert [r.reason for r in late] == [LateReason.WINDOW_CLOSED, LateReason.EXPIRED]


@settings(max_examples=100, deadline=None)
@given(scenario)
def test_pure_step_function_equals_the_stateful_operator(case):
    from floodmark.core.window import step

    window, trigger, lateness, raw_ops = case
    ops = numbered(raw_ops)
    spec = make_spec(window, trigger, lateness, AccumulationMode.DISCARDING)
    expected, _ = run(spec, ops)
    # One micro-batch per "add"; watermark and processing time moves fold into the next batch.
    snapshot, panes, watermark, now = None, [], -10, 0
    snapshot, _, _ = step(spec, snapshot, None, watermark, now)
    for kind, arg in ops:
        if kind == "wm":
            watermark += arg
        elif kind == "pt":
            now += arg
        else:
            snapshot, out, _ = step(spec, snapshot, batch_of(arg), watermark, now)
            panes += out.all_panes()
    snapshot, out, _ = step(spec, snapshot, None, MAX_TIMESTAMP, now)
    panes += out.all_panes()

    # Processing-time firings may move to the next batch, so compare what each window emitted in total.
    def totals(ps):
        acc: dict = {}
        for p in ps:
            acc.setdefault((p.key, p.window), []).extend(p.value)
        return {k: sorted(v) for k, v in acc.items()}

    assert totals(panes) == totals(expected)


NUMERIC_AGGREGATE = aggregates.several(
    n=aggregates.count(),
    s=aggregates.sum("v"),
    lo=aggregates.min("v"),
    hi=aggregates.max("v"),
    avg=aggregates.mean("v"),
)
"""Every aggregate the columnar operator supports, reading field ``v``."""


def with_numeric_values(records):
    """A batch whose records also carry a numeric field ``v`` derived from their id."""
    batch = batch_of(records)
    batch.columns["v"] = np.array([float((i * 37) % 11) for _, i, _ in records])
    return batch


COLUMNAR_WINDOWS = [
    windows.Tumbling(10),
    windows.Sliding(10, 5),
    windows.Sliding(9, 4),
    windows.Cumulate(5, 15),
    windows.Global(),
]
COLUMNAR_TRIGGERS = [
    triggers.Default(),
    triggers.AfterWatermark(),
    triggers.Never(),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(1)),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(4)),
    triggers.AfterWatermark(late=triggers.AfterCount(1)),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(3), late=triggers.AfterCount(1)),
    triggers.AfterWatermark(early=triggers.AfterCount(1)),
    triggers.AfterWatermark(early=triggers.AfterCount(3)),
    triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
    triggers.Repeatedly(triggers.AfterProcessingTime(1)),
    triggers.Repeatedly(triggers.AfterProcessingTime(4)),
]
"""Every columnar trigger; the processing-time ones are columnar only without allowed lateness (specs built from
this list are filtered by ``is_columnar``)."""
PARTIAL_TRIGGERS = [t for t in COLUMNAR_TRIGGERS if "early=AfterCount" not in repr(t)]
"""Early count firings need the records themselves (a pane after exactly n): no map-side partials."""


columnar_spec = st.builds(
    lambda window, trigger, lateness, mode, combiner: WindowSpec(
        window, NUMERIC_AGGREGATE, trigger, lateness, mode, combiner
    ),
    st.sampled_from(COLUMNAR_WINDOWS),
    st.sampled_from(COLUMNAR_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.sampled_from(list(__import__("floodmark").TimestampCombiner)),
).filter(lambda spec: spec.is_columnar)
"""Every spec the columnar operator runs: windows x triggers x lateness x accumulation x timestamp combiner."""


@settings(max_examples=600, deadline=None)
@given(columnar_spec, st.lists(op, min_size=1, max_size=25))
def test_columnar_operator_equals_the_general_operator(spec, raw_ops):
    assert_same_panes_on_both_operators(spec, raw_ops)


@settings(max_examples=300, deadline=None)
@given(columnar_spec, st.lists(op, min_size=1, max_size=25))
def test_columnar_operator_gauges_equal_the_general_operator(spec, raw_ops):
    """Output hold, oldest pending record and open windows agree after every move (they feed the stage watermarks)."""
    assert_same_gauges_on_both_operators(spec, raw_ops)


SESSION_TRIGGERS = PARTIAL_TRIGGERS
"""The columnar forms sessions run on the columnar operator (count firings of merged windows stay general)."""

session_spec = st.builds(
    lambda gap, trigger, lateness, mode, combiner: WindowSpec(
        windows.Sessions(gap), NUMERIC_AGGREGATE, trigger, lateness, mode, combiner
    ),
    st.sampled_from([3, 5, 12]),
    st.sampled_from(SESSION_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.sampled_from(list(__import__("floodmark").TimestampCombiner)),
).filter(lambda spec: spec.is_columnar)
session_op = st.one_of(
    st.tuples(
        st.just("add"),
        st.lists(st.tuples(st.sampled_from("ab"), st.integers(-5, 40)), min_size=1, max_size=8),
    ),
    st.tuples(st.just("wm"), st.integers(0, 8)),
    st.tuples(st.just("pt"), st.integers(0, 6)),
)
"""Two keys and a narrow time range: records merge sessions, and late ones bridge fired or closed sessions."""


@settings(max_examples=800, deadline=None)
@given(session_spec, st.lists(session_op, min_size=1, max_size=25))
def test_columnar_sessions_equal_the_general_operator(spec, raw_ops):
    """Merging windows on the columnar operator: the same panes and late records as record-by-record merging,
    with late records that bridge sessions, allowed lateness, every combiner and every trigger it runs."""
    assert spec.is_columnar
    assert_same_panes_on_both_operators(spec, raw_ops)


@settings(max_examples=300, deadline=None)
@given(session_spec, st.lists(session_op, min_size=1, max_size=25))
def test_columnar_session_gauges_equal_the_general_operator(spec, raw_ops):
    assert_same_gauges_on_both_operators(spec, raw_ops)


def assert_same_panes_on_both_operators(spec, raw_ops):
    ops = numbered(raw_ops)

    def drive(operator):
        panes, late = run(spec, ops, operator=operator, make_batch=with_numeric_values, roundtrip=True)
        return sorted(map(pane_key_dict, panes), key=pane_order), sorted(
            (r.key, r.window, r.value, r.reason, r.lateness) for r in late
        )

    assert drive(WindowOperator(spec, -10, policy="columnar")) == drive(WindowOperator(spec, -10, policy="general"))


@settings(max_examples=300, deadline=None)
@given(st.one_of(columnar_spec, session_spec), st.lists(op, min_size=1, max_size=25))
def test_both_operators_announce_the_same_deadlines(spec, raw_ops):
    """The next watermark and processing time at which something would fire (they decide when an idle query
    needs its next batch) agree after every move."""
    assert_same_gauges_on_both_operators(spec, raw_ops, lambda o: (o.gauges().next_firing, o.gauges().next_timer))


def assert_same_gauges_on_both_operators(spec, raw_ops, gauges_of=None):
    gauges_of = gauges_of or (lambda o: (o.gauges().hold, o.gauges().oldest_pending, o.gauges().open_state))

    operators = [WindowOperator(spec, -10, policy="columnar"), WindowOperator(spec, -10, policy="general")]
    watermark, now = -10, 0
    for kind, arg in numbered(raw_ops):
        watermark, now = watermark + (arg if kind == "wm" else 0), now + (arg if kind == "pt" else 0)
        gauges = []
        for operator in operators:
            if kind == "add":
                operator.add(with_numeric_values(arg))
            elif kind == "wm":
                operator.advance_watermark(watermark)
            else:
                operator.advance_processing_time(now)
            gauges.append(gauges_of(operator))
        assert gauges[0] == gauges[1]


def pane_order(key_dict):
    """(key, window, index) identifies a pane; values may hold None (empty min/max), which does not sort."""
    return str(key_dict[0]), key_dict[1], key_dict[5]


def pane_key_dict(p):
    return (
        p.key,
        p.window,
        tuple(sorted(p.value.items())),
        p.timestamp,
        p.timing,
        p.pane_index,
        p.nonspeculative_index,
        p.is_last,
    )


def test_columnar_early_count_panes_fire_mid_batch_and_restart_the_pending_clock():
    spec = WindowSpec(
        windows.Tumbling(100),
        NUMERIC_AGGREGATE,
        triggers.AfterWatermark(early=triggers.AfterCount(3)),
        0,
        AccumulationMode.ACCUMULATING,
    )
    seen = []
    for operator in (WindowOperator(spec, policy="columnar"), WindowOperator(spec, policy="general")):

        def add(values, operator=operator):
            ts = np.arange(len(values)) + 1
            keys = np.array(["k"] * len(values), dtype=object)
            batch = RecordBatch(keys, ts, {None: np.arange(len(values)), "v": np.array(values, dtype=float)})
            panes = operator.add(batch).all_panes()
            return [(p.timing.value, p.pane_index, p.value["n"], p.value["s"]) for p in panes]

        first = add([1.0])
        operator.advance_processing_time(10)
        second = add([2.0, 3.0, 4.0, 5.0, 6.0, 7.0])  # panes after the 3rd and 6th record of the window
        seen.append((first, second, operator.gauges().oldest_pending))
    assert seen[0] == seen[1] == ([], [("EARLY", 0, 3, 6.0), ("EARLY", 1, 6, 21.0)], 10)


def test_columnar_late_panes_accumulate_every_aggregate():
    spec = WindowSpec(
        windows.Tumbling(10),
        NUMERIC_AGGREGATE,
        triggers.Default(),
        100,
        AccumulationMode.ACCUMULATING,
    )
    results = []
    for operator in (WindowOperator(spec, policy="columnar"), WindowOperator(spec, policy="general")):

        def add(values, ts, operator=operator):
            keys = np.array(["k"] * len(ts), dtype=object)
            return operator.add(RecordBatch(keys, np.array(ts), {None: np.arange(len(ts)), "v": np.array(values)}))

        add([5.0], [1])
        on_time = operator.advance_watermark(20).all_panes()
        late = add([1.0, 9.0], [2, 3]).all_panes()
        results.append([(p.timing.value, p.pane_index, p.value) for p in on_time + late])
    assert (
        results[0]
        == results[1]
        == [
            ("ON_TIME", 0, {"n": 1, "s": 5.0, "lo": 5.0, "hi": 5.0, "avg": 5.0}),
            ("LATE", 1, {"n": 2, "s": 6.0, "lo": 1.0, "hi": 5.0, "avg": 3.0}),
            ("LATE", 2, {"n": 3, "s": 15.0, "lo": 1.0, "hi": 9.0, "avg": 5.0}),
        ]
    )


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(COLUMNAR_WINDOWS),
    st.sampled_from(PARTIAL_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.sampled_from(list(__import__("floodmark").TimestampCombiner)),
    st.lists(op, min_size=1, max_size=25),
    st.integers(0, 10),
)
def test_map_side_combine_gives_the_same_panes(window, trigger, lateness, mode, combiner, raw_ops, ahead):
    """combine() before the shuffle + add_partials == add_records of every record (even with a later watermark)."""
    from floodmark.core.combine import combine

    spec = WindowSpec(window, NUMERIC_AGGREGATE, trigger, lateness, mode, combiner)
    assume(spec.is_columnar)
    ops = numbered(raw_ops)

    class Combining(WindowOperator):
        """Splits every batch in two halves (two 'partitions'), combines each, ships partials + raw records."""

        def add(self, batch):
            from floodmark.core.emitted import Emitted

            out = Emitted()
            halves = [np.arange(len(batch))[: len(batch) // 2], np.arange(len(batch))[len(batch) // 2 :]]
            raws = []
            for half in halves:
                part = RecordBatch(
                    batch.keys[half], batch.timestamps[half], {c: v[half] for c, v in batch.columns.items()}
                )
                # The combiner may use a later watermark than the operator's: that only keeps more records raw.
                partials, raw = combine(spec, self.watermark + ahead, part)
                out.extend(self.add_partials(partials))
                raws.append(half[raw])
            raw = np.concatenate(raws)
            rest = RecordBatch(batch.keys[raw], batch.timestamps[raw], {c: v[raw] for c, v in batch.columns.items()})
            out.extend(super().add(rest))
            return out

    def drive(operator):
        panes, late = run(spec, ops, operator=operator, make_batch=with_numeric_values)
        return sorted(map(pane_key_dict, panes), key=pane_order), sorted(
            (r.key, r.window, r.value, r.reason, r.lateness) for r in late
        )

    assert drive(Combining(spec, -10)) == drive(WindowOperator(spec, -10, policy="columnar"))
