"""Deferred partials (``floodmark.core.segments``): the same panes, late records and gauges as the operator that
merges every batch at once, while a runtime stores the segments apart and restores the operator every batch."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import (
    COLUMNAR_WINDOWS,
    NUMERIC_AGGREGATE,
    PARTIAL_TRIGGERS,
    numbered,
    op,
    pane_key_dict,
    pane_order,
    with_numeric_values,
)

from floodmark import AccumulationMode, TimestampCombiner, aggregates, triggers, windows
from floodmark.core import segments
from floodmark.core.combine import combine
from floodmark.core.emitted import Emitted
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.window import WindowOperator, advance, restore_operator

DEFERRING_TRIGGERS = [t for t in PARTIAL_TRIGGERS if "AfterProcessingTime" not in repr(t)]


class Storage:
    """What a runtime keeps: the head and each segment as its own value, restored every batch."""

    def __init__(self) -> None:
        self.head: bytes | None = None
        self.values: dict[int, bytes] = {}
        self.reads = 0

    def save(self, operator: WindowOperator) -> None:
        self.head, added, dropped = operator.snapshot_parts()
        assert not set(added) & set(self.values), "a segment is written once"
        assert dropped <= set(self.values), "only stored segments are deleted"
        self.values.update(added)
        for segment_id in dropped:
            del self.values[segment_id]

    def load(self, segment_id: int) -> bytes:
        self.reads += 1
        return self.values[segment_id]

    def restore(self, spec: WindowSpec):
        assert self.head is not None
        return restore_operator(spec, self.head, self.load)


def combined(spec: WindowSpec, operator, batch: RecordBatch) -> Emitted:
    """A batch as the Spark runtime hands it over: on-time records as partials, the rest as records."""
    partials, raw = combine(spec, operator.watermark, batch)
    out = operator.add_partials(partials)
    rest = RecordBatch(batch.keys[raw], batch.timestamps[raw], {c: v[raw] for c, v in batch.columns.items()})
    out.extend(operator.add(rest))
    return out


def gauges(operator) -> tuple:
    return operator.gauges().hold, operator.gauges().oldest_pending, operator.gauges().next_firing


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(COLUMNAR_WINDOWS),
    st.sampled_from(DEFERRING_TRIGGERS),
    st.sampled_from([0, 5, 20]),
    st.sampled_from(list(AccumulationMode)),
    st.lists(op, min_size=1, max_size=25),
    st.sampled_from([1, 2, segments.FANOUT]),
    st.sampled_from([0, 4]),
)
def test_deferred_partials_give_the_panes_and_gauges_of_merging_at_once(
    window, trigger, lateness, mode, ops, fanout, defer_above
):
    spec = WindowSpec(window, NUMERIC_AGGREGATE, trigger, lateness, mode)
    assert spec.defers_partials
    eager = WindowOperator(spec, -10, policy="columnar")
    storage = Storage()
    deferred = WindowOperator(spec, -10, deferred=True, policy="columnar")
    results: list[tuple[list, list]] = [([], []), ([], [])]
    watermark, now = -10, 0
    with mock.patch.object(segments, "FANOUT", fanout), mock.patch.object(segments, "DEFER_ABOVE", defer_above):
        for kind, arg in [*numbered(ops), ("wm", MAX_TIMESTAMP + 10)]:
            watermark, now = (
                min(watermark + (arg if kind == "wm" else 0), MAX_TIMESTAMP),
                now + (arg if kind == "pt" else 0),
            )
            for i, operator in enumerate((eager, deferred)):
                if kind == "add":
                    emitted = combined(spec, operator, with_numeric_values(arg))
                elif kind == "wm":
                    emitted = operator.advance_watermark(watermark)
                else:
                    emitted = operator.advance_processing_time(now)
                results[i][0].extend(map(pane_key_dict, emitted.all_panes()))
                results[i][1].extend((r.key, r.window, r.value, r.reason, r.lateness) for r in emitted.late)
            assert gauges(deferred) == gauges(eager)
            assert deferred.gauges().open_state >= eager.gauges().open_state
            storage.save(deferred)
            deferred = storage.restore(spec)
    assert deferred.gauges().open_state == eager.gauges().open_state == 0
    assert not storage.values, "every segment is merged and deleted by the end"
    for panes, late in results:
        panes.sort(key=pane_order)
        late.sort(key=str)
    assert results[0] == results[1]


@mock.patch.object(segments, "DEFER_ABOVE", 0)
def test_a_batch_reads_no_segment_until_the_watermark_reaches_one():
    spec = WindowSpec(windows.Tumbling(3_600_000), {"n": aggregates.count()})
    storage = Storage()
    operator = WindowOperator(spec, deferred=True)
    for batch in range(20):
        keys = np.array([f"k{batch}-{i}" for i in range(100)], dtype=object)
        records = RecordBatch(keys, np.full(100, batch * 1_000, dtype=np.int64), {None: keys})
        advance(operator, None, batch * 1_000, batch, combine(spec, batch * 1_000, records)[0])
        storage.save(operator)
        operator = storage.restore(spec)
        if batch < segments.FANOUT:
            assert storage.reads == 0, "new windows only add segments"
    # Batches 0-8 and 9-17 made level-0 segments whose ninth merged the run into one of level 1 (the ninth was in
    # memory): two compactions read 8 stored segments each; two level-1 segments and those of batches 18-19 stay.
    assert storage.reads == 2 * segments.FANOUT
    assert len(storage.values) == 4
    assert operator.gauges().open_state == 2_000 and operator.gauges().hold == 3_599_999
    out = advance(operator, None, 3_600_000, 30)
    assert sum(len(f) for f in out.pane_frames) == 2_000
    assert operator.gauges().open_state == 0


def test_specs_with_early_firings_or_other_output_times_merge_at_once():
    early = WindowSpec(
        windows.Tumbling(10), {"n": aggregates.count()}, triggers.AfterWatermark(early=triggers.AfterProcessingTime(5))
    )
    earliest = WindowSpec(
        windows.Tumbling(10), {"n": aggregates.count()}, timestamp_combiner=TimestampCombiner.EARLIEST
    )
    for spec in (early, earliest):
        assert not spec.defers_partials
        assert WindowOperator(spec, deferred=True).policy.segments is None


def test_a_small_table_takes_partials_at_once_and_segments_start_when_it_grows():
    spec = WindowSpec(windows.Tumbling(3_600_000), {"n": aggregates.count()})
    operator = WindowOperator(spec, deferred=True)
    with mock.patch.object(segments, "DEFER_ABOVE", 150):
        for batch in range(3):
            keys = np.array([f"k{batch}-{i}" for i in range(100)], dtype=object)
            records = RecordBatch(keys, np.full(100, batch, dtype=np.int64), {None: keys})
            advance(operator, None, 0, batch, combine(spec, 0, records)[0])
            assert (operator.table.window_count(), len(operator.policy.segments)) == [
                (100, 0),
                (100, 1),
                (100, 2),
            ][batch]


@pytest.mark.parametrize("fanout", [1, 3])
def test_a_self_contained_snapshot_keeps_the_segments(fanout):
    spec = WindowSpec(windows.Tumbling(10), {"n": aggregates.count()})
    operator = WindowOperator(spec, deferred=True)
    with mock.patch.object(segments, "FANOUT", fanout), mock.patch.object(segments, "DEFER_ABOVE", 0):
        for batch in range(5):
            keys = np.array(["a", "b"], dtype=object)
            records = RecordBatch(keys, np.array([batch, batch], dtype=np.int64), {None: keys})
            advance(operator, None, -1, batch, combine(spec, -1, records)[0])
    restored = restore_operator(spec, operator.snapshot())
    out = advance(restored, None, 100, 5)
    panes = sorted((p.key, p.value["n"]) for p in out.all_panes())
    assert panes == [("a", 5), ("b", 5)]


def stored_sliding_segment(spec: WindowSpec, storage: Storage):
    """An operator restored from ``storage`` after one batch of records "a" at 1 and "b" at 2 became a segment of
    every window of ``spec`` that holds them."""
    operator = WindowOperator(spec, deferred=True)
    keys = np.array(["a", "b"], dtype=object)
    records = RecordBatch(keys, np.array([1, 2], dtype=np.int64), {None: keys})
    advance(operator, None, -1, 0, combine(spec, -1, records)[0])
    storage.save(operator)
    return storage.restore(spec)


@mock.patch.object(segments, "DEFER_ABOVE", 0)
def test_the_watermark_takes_a_sliding_segments_due_rows_and_leaves_the_rest_apart():
    spec = WindowSpec(windows.Sliding(10, 5), {"n": aggregates.count()})
    storage = Storage()
    operator = stored_sliding_segment(spec, storage)  # windows [-5, 5) and [0, 10) of each key
    out = advance(operator, None, 4, 1)  # reaches [-5, 5) only
    assert sorted((p.key, p.window.start, p.value["n"]) for p in out.all_panes()) == [("a", -5, 1), ("b", -5, 1)]
    assert len(operator.policy.segments) == 1 and operator.policy.segments.rows == 2, "the [0, 10) rows stay a segment"
    assert operator.table.window_count() == 0
    storage.save(operator)
    assert len(storage.values) == 1
    out = advance(storage.restore(spec), None, 9, 2)
    assert sorted((p.key, p.window.start, p.value["n"]) for p in out.all_panes()) == [("a", 0, 1), ("b", 0, 1)]


@mock.patch.object(segments, "DEFER_ABOVE", 0)
def test_a_sliding_segments_rest_is_split_by_window_end_and_each_piece_is_read_once():
    spec = WindowSpec(windows.Sliding(100, 10), {"n": aggregates.count()})
    storage = Storage()
    operator = stored_sliding_segment(spec, storage)  # ten windows each, ends 10, 20, ..., 100
    out = advance(operator, None, 9, 1)  # reaches the window ending at 10 only: nine ends stay, in eight pieces
    assert sorted(p.key for p in out.all_panes()) == ["a", "b"]
    infos = operator.policy.segments.infos
    assert [info.level for info in infos] == [segments.PIECE] * segments.FANOUT
    assert [info.first_end for info in infos] == [20, 30, 40, 50, 60, 70, 80, 90], "ends of index 9g/8 to 9(g+1)/8"
    assert [info.rows for info in infos] == [2] * 7 + [4]
    storage.save(operator)
    reads = storage.reads
    for end in range(20, 101, 10):
        operator = storage.restore(spec)
        out = advance(operator, None, end - 1, end)
        assert sorted((p.key, p.window.end) for p in out.all_panes()) == [("a", end), ("b", end)]
        storage.save(operator)
    # Each piece is read once; the one of two ends (90 and 100) is read at 90 and its 100-rows written once more.
    assert storage.reads - reads == segments.FANOUT + 1
    assert not storage.values and operator.gauges().open_state == 0


@mock.patch.object(segments, "DEFER_ABOVE", 0)
def test_pieces_stop_a_run_of_one_level_and_are_never_compacted():
    spec = WindowSpec(windows.Sliding(100, 10), {"n": aggregates.count()})
    operator = WindowOperator(spec, deferred=True)
    keys = np.array(["a"], dtype=object)
    advance(operator, None, -1, 0, combine(spec, -1, RecordBatch(keys, np.array([1]), {None: keys}))[0])
    advance(operator, None, 9, 1)  # the first segment's rest: eight pieces
    for batch in range(2, 2 + segments.FANOUT + 1):  # then FANOUT + 1 new level-0 segments of later windows
        records = RecordBatch(keys, np.array([1_000 + batch]), {None: keys})
        advance(operator, None, 9, batch, combine(spec, 9, records)[0])
    levels = [info.level for info in operator.policy.segments.infos]
    assert levels == [segments.PIECE] * segments.FANOUT + [1], "the level-0 run merged, the pieces stayed apart"
