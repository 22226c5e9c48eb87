"""Combiner and stateful processor without a Spark session: validation, combining, stats and gauges."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

import floodmark
from floodmark import aggregates, triggers, windows
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.window import step
from floodmark.driver.checkpoint_files import LocalFiles
from floodmark.protocol.control import ControlEntry
from floodmark.protocol.wire import DEAD_LETTERS_SPLIT, IN, KIND, OUTPUT, STAGE, TICK
from floodmark.spark import blocks
from floodmark.spark import plan as p
from floodmark.spark.driver import checkpoint_records
from floodmark.spark.driver.checkpoint_records import check_state_format
from floodmark.spark.map_side.combiner import MapSideCombiner
from floodmark.spark.outputs.unpack import UnpackOutput
from floodmark.spark.rows import conform
from floodmark.spark.stateful import state_codec
from floodmark.spark.stateful.levels import CARRIER, StageLevel

STAGE_NAME = "s"


class MemoryGroupState:
    """What the processor uses of PySpark's GroupState (``getOption`` is a property there too)."""

    def __init__(self):
        self.value = None

    @property
    def getOption(self):
        return self.value

    def update(self, value):
        self.value = value


def make_processor(skew=None, parts=None, window=None, v_type=None, **spec):
    """A processor (and its combiner) for input ``(ts, k, v, part)``; by default count + sum of ``v`` as text."""
    parts = parts or {"n": aggregates.count(), "total": aggregates.sum("v")}
    plan = p.RuntimePlan(
        p.StageSemantics(
            name=STAGE_NAME,
            spec=WindowSpec(window or windows.Tumbling(10), aggregates.several(**parts), **spec),
            key_columns=("k",),
            key_types=(StringType(),),
            result_types=tuple((name, p.result_type(a, {"v": DoubleType()})) for name, a in parts.items()),
            numeric_fields=("v",),
        ),
        p.InputBinding(
            user_columns=("ts", "k", "v", "part"),
            max_future_skew_ms=skew,
            integral_columns=("ts", "part"),
            ts_column="ts",
            split_column="part",
        ),
    )
    level = StageLevel({STAGE_NAME: plan}, {}, [STAGE_NAME])
    processor = level.processors[STAGE_NAME]
    processor.level = level  # the operator that hosts it in a query: carrier rows in and out
    processor.state = MemoryGroupState()  # the bucket's state, kept across calls by the tests
    input_fields = [
        StructField("ts", LongType()),
        StructField("k", StringType()),
        StructField("v", v_type or StringType()),
        StructField("part", LongType()),
        StructField(p.BUCKET, IntegerType()),
    ]
    processor.combiner = MapSideCombiner(plan, StructType([*input_fields, *plan.stage.combiner_fields()]))
    return processor


TEXT = pa.string()


def combine(processor, rows, watermark, ptime, v_type=TEXT):
    """The combiner's rows for ``rows`` of ``(ts, k, v, part)``; ``v`` as text by default (numbers parsed)."""
    ts, k, v, part = zip(*rows, strict=True) if rows else ((), (), (), ())
    text = pa.types.is_string(v_type)
    data = pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(k, pa.string()),
            "v": pa.array([None if x is None or not text else str(x) for x in v] if text else v, v_type),
            "part": pa.array(part, pa.int64()),
            p.BUCKET: pa.array([0] * len(rows), pa.int32()),
        }
    )
    return processor.combiner.process(data, watermark, ptime)


def shuffle_rows(processor, rows, watermark, ptime, v_type=TEXT):
    return combine(processor, rows, watermark, ptime, v_type).to_pandas()


def entry(seq, watermark, ptime, **fields):
    """Control entry ``seq`` with ``watermark`` as the stage's input watermark."""
    return ControlEntry(seq, watermark, ptime, stage_watermarks={STAGE_NAME: watermark}, **fields)


def tick_row():
    return pd.DataFrame({STAGE: [STAGE_NAME], KIND: [TICK], p.BUCKET: [0], blocks.BLOCK: [None]})


def call(processor, rows, seq, watermark, ptime, v_type=TEXT):
    """The bucket's output for one batch: the combiner's blocks plus the bucket's tick row, as Spark passes them
    to the level hosting the stage."""
    processor.current_entry = lambda: entry(seq, watermark, ptime)
    packed = pa.Table.from_batches([blocks.pack(combine(processor, rows, watermark, ptime, v_type))]).to_pandas()
    packed = packed.assign(**{STAGE: STAGE_NAME, KIND: IN})
    frame = pd.concat([packed, tick_row()], ignore_index=True) if len(packed) else tick_row()
    (out,) = list(processor.level((STAGE_NAME, 0), iter([frame]), processor.state))
    return unpacked(processor, out)


def unpacked(processor, out):
    """What a bucket returns to Spark (carrier rows), through Arrow, with its OUTPUT blocks unpacked as the sink
    unpacks them: the row form, one row per pane, late record, dead letter, STATS or GAUGE row
    (``RuntimePlan.output_schema``)."""
    assert list(out.columns) == [f.name for f in CARRIER.fields]
    table = pa.Table.from_pandas(out, schema=to_arrow_schema(CARRIER), preserve_index=False)
    assert set(table.column(STAGE).to_pylist()) <= {STAGE_NAME}
    output = table.filter(pc.equal(table[KIND], OUTPUT))
    schema = to_arrow_schema(processor.plan.stage.emitted_schema())
    emitted = pa.Table.from_batches(list(UnpackOutput(STAGE_NAME, None, schema)(output.to_batches())), schema=schema)
    emitted = emitted.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    small = (
        table.filter(pc.invert(pc.equal(table[KIND], OUTPUT)))
        .drop_columns([STAGE, blocks.BLOCK])
        .to_pandas(ignore_metadata=True)
    )
    return conform([emitted, small], processor.plan.stage.output_schema())


def test_bad_rows_stats_and_gauges():
    processor = make_processor(skew=1_000)
    out = call(
        processor,
        [(1, "a", 1.0, 0), (2, "a", "x", 0), (None, "b", 2.0, 1), (5_000, "c", 1.0, 1), (3, "a", 2.5, 1)],
        seq=0,
        watermark=-(2**63),
        ptime=100,
    )
    bad = out[out.fm_kind == p.BAD].sort_values("k")
    assert bad[["k", "reason"]].values.tolist() == [
        ["a", "field 'v' is not a number: 'x'"],
        ["b", "missing timestamp"],
        [
            "c",
            "timestamp 5000 (1970-01-01T00:00:05.000Z) is more than 1 s (1000 ms) ahead of processing time 100 "
            "(1970-01-01T00:00:00.100Z)",
        ],
    ]
    assert '"ts": 2' in bad["record"].iloc[0], "integral columns stay integers in the record JSON"
    stats = out[out.fm_kind == p.STATS].sort_values("fm_split")
    # The source's records, "x" among them (a dead letter of this stage only), and its two rows that are none.
    assert stats[["fm_split", "fm_count", "fm_min_ts", "fm_max_ts"]].values.tolist() == [
        [DEAD_LETTERS_SPLIT, 2, 0, 0],
        ["0", 2, 1, 2],
        ["1", 1, 3, 3],
    ]
    (gauge,) = out[out.fm_kind == p.GAUGE].to_dict("records")
    assert (gauge["fm_seq"], gauge["fm_bad_count"], gauge["fm_pane_count"], gauge["fm_open_windows"]) == (0, 3, 0, 1)

    fired = call(processor, [], seq=1, watermark=9, ptime=200)
    panes = fired[fired.fm_kind == p.PANE]
    assert panes[["k", "window_start", "n", "total", "timing"]].values.tolist() == [["a", 0, 2, 3.5, "ON_TIME"]]
    assert fired[fired.fm_kind == p.GAUGE]["fm_pane_count"].item() == 1


@pytest.mark.parametrize(
    "value, v_type, reason",
    [
        (np.nan, pa.float64(), "field 'v' is missing"),
        (None, pa.float64(), "field 'v' is missing"),
        (None, pa.string(), "field 'v' is missing"),
        ("1,5", pa.string(), "field 'v' is not a number: '1,5'"),
    ],
)
def test_missing_or_unparsable_numeric_input_is_a_bad_record(value, v_type, reason):
    processor = make_processor()
    out = call(processor, [(1, "a", value, 0), (2, "a", 2.0, 0)], seq=0, watermark=-(2**63), ptime=0, v_type=v_type)
    assert out[out.fm_kind == p.BAD]["reason"].tolist() == [reason]
    assert out[out.fm_kind == p.GAUGE]["fm_open_windows"].item() == 1, "the good record is kept"


def test_on_time_records_are_combined_before_the_shuffle_and_late_ones_stay_records():
    processor = make_processor()
    rows = [(1, "a", 1.0, 0), (3, "a", 2.5, 1), (4, "b", 1.0, 0), (12, "a", 1.0, 0), (13, "a", 4.0, 0)]
    shuffled = shuffle_rows(processor, rows, watermark=-(2**63), ptime=0)
    partial = shuffled[shuffled[p.ROW] == p.PARTIAL].sort_values(["k", p.WINDOW_START])
    assert partial[["k", p.WINDOW_START, p.COUNT]].values.tolist() == [["a", 0, 2], ["a", 10, 2], ["b", 0, 1]]
    assert (shuffled[p.ROW] == p.RAW).sum() == 0
    # Window [0, 10) is past watermark 9: its record stays a record (it is late and needs its payload).
    shuffled = shuffle_rows(processor, rows, watermark=9, ptime=0)
    assert sorted(shuffled[shuffled[p.ROW] == p.RAW]["ts"].tolist()) == [1, 3, 4]
    assert shuffled[shuffled[p.ROW] == p.PARTIAL][p.COUNT].tolist() == [2]

    call(processor, rows[:2], seq=0, watermark=-(2**63), ptime=0)
    out = call(processor, [*rows[2:], (5, "a", 7.0, 0)], seq=1, watermark=9, ptime=0)
    panes = out[out.fm_kind == p.PANE].sort_values("window_start")
    assert panes[["k", "window_start", "n", "total"]].values.tolist() == [["a", 0, 2, 3.5]]
    late = out[out.fm_kind == p.LATE].sort_values("k")
    assert late[["k", "event_time", "reason"]].values.tolist() == [["a", 5, "EXPIRED"], ["b", 4, "EXPIRED"]]
    final = call(processor, [], seq=2, watermark=2**63 - 1, ptime=0)
    panes = final[final.fm_kind == p.PANE]
    assert panes[["k", "window_start", "n", "total"]].values.tolist() == [["a", 10, 2, 5.0]]


# ------------------------------------------------------------------ combiner + processor == core
COMBINABLE = [
    windows.Tumbling(10),
    windows.Tumbling(7, offset=3),
    windows.Sliding(10, 5),
    windows.Cumulate(5, 15),
    windows.Global(),  # ends at 2**63 - 1, which a float64 column would not hold
]
record = st.tuples(
    st.integers(-6, 60).map(lambda ts: None if ts == -6 else ts),  # None: a bad record (now and then)
    st.sampled_from(["a", "b", None]),  # key (null keys are keys too)
    st.integers(-4, 9).map(lambda v: None if v == -4 else float(v)),  # whole numbers: sums exact in any order
    st.integers(0, 2),  # split
)


EVERY_AGGREGATE = {
    "n": aggregates.count(),
    "total": aggregates.sum("v"),
    "lo": aggregates.min("v"),
    "hi": aggregates.max("v"),
    "avg": aggregates.mean("v"),
}


def nulls(row):
    """min, max and mean of a pane row, NaN as None: Spark turns NaN in a pandas result into null (empty panes)."""
    return tuple(None if pd.isna(x) else x for x in (row.lo, row.hi, row.avg))


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(COMBINABLE),
    st.sampled_from([0, 10]),
    st.sampled_from(list(TimestampCombiner)),
    st.sampled_from(
        [
            triggers.Default(),
            triggers.AfterWatermark(early=triggers.AfterProcessingTime(5)),
            triggers.AfterWatermark(early=triggers.AfterProcessingTime(5), late=triggers.AfterCount(1)),
            triggers.AfterWatermark(early=triggers.AfterCount(2), late=triggers.AfterCount(1)),
            triggers.Repeatedly(triggers.AfterProcessingTime(5)),  # columnar without allowed lateness only
        ]
    ),
    st.lists(st.tuples(st.lists(record, max_size=12), st.integers(0, 25)), min_size=1, max_size=4),
)
def test_combiner_and_processor_make_the_panes_the_core_makes(window, lateness, combiner, trigger, batches):
    """Map-side Arrow aggregation + shuffle + processor == the core's step on the good records, batch by batch."""
    assume(lateness == 0 or "Repeatedly" not in repr(trigger))  # processing time alone is columnar without lateness
    processor = make_processor(
        parts=EVERY_AGGREGATE,
        window=window,
        v_type=DoubleType(),
        allowed_lateness=lateness,
        timestamp_combiner=combiner,
        trigger=trigger,
    )
    # The columnar operator runs every one of these; early count firings need records, not partials.
    assert processor.plan.stage.combines == ("early=AfterCount" not in repr(trigger))
    plan = processor.plan
    snapshot, expected, got = None, [], []
    watermarks = [-(2**63)]
    for _, advance in batches:
        watermarks.append(max(watermarks[-1], 0) + advance)
    watermarks[-1] = 2**63 - 1  # the end of input fires everything
    for seq, ((rows, _), watermark) in enumerate(zip([*batches, ([], 0)], watermarks, strict=True)):
        ptime = 3 * seq  # early firings (5 ms after a window's first record) come every other batch
        out = call(processor, rows, seq, watermark, ptime, v_type=pa.float64())
        got += [
            (
                r.k,
                r.window_start,
                r.window_end,
                r.pane_timestamp,
                r.timing,
                r.pane_index,
                r.is_last,
                r.n,
                r.total,
                *nulls(r),
            )
            for r in out[out.fm_kind == p.PANE].itertuples()
        ]
        good = [r for r in rows if r[0] is not None and r[2] is not None]
        assert out[out.fm_kind == p.BAD].shape[0] == len(rows) - len(good)
        batch = None
        if good:
            keys = np.empty(len(good), dtype=object)
            keys[:] = [r[1] for r in good]
            ts = np.array([r[0] for r in good], dtype=np.int64)
            batch = RecordBatch(keys, ts, {None: np.arange(len(good)), "v": np.array([r[2] for r in good])})
        snapshot, emitted, _ = step(plan.stage.spec, snapshot, batch, watermark, ptime)
        expected += [
            (
                pane.key,
                pane.window.start,
                pane.window.end,
                pane.timestamp,
                pane.timing.value,
                pane.pane_index,
                pane.is_last,
                *(pane.value[name] for name in ("n", "total", "lo", "hi", "avg")),
            )
            for pane in emitted.all_panes()
        ]
        late = out[out.fm_kind == p.LATE]
        assert sorted(zip(late.k, late.event_time, strict=True), key=str) == sorted(
            ((r.key, r.timestamp) for r in emitted.late), key=str
        )
    assert len(got) == len(expected)
    assert sorted(got, key=str) == sorted(expected, key=str)  # str: None keys sort with the others


def test_state_is_stored_compressed_and_old_uncompressed_values_still_load():
    snapshot = bytes(range(256)) * 4_000  # repetitive, like columnar state
    blob = state_codec.encode(snapshot)
    assert blob.startswith(state_codec.PREFIX) and len(blob) < len(snapshot) / 10
    assert state_codec.decode(blob) == snapshot
    assert state_codec.decode(snapshot) == snapshot, "a value written before compression loads as it is"

    processor = make_processor()
    call(processor, [(1, "a", 1.0, 0)], seq=0, watermark=-(2**63), ptime=0)
    processor.state.value = (state_codec.decode(processor.state.value[0]),)  # as an older version stored it
    out = call(processor, [], seq=1, watermark=2**63 - 1, ptime=0)
    assert out[out.fm_kind == p.PANE][["k", "n"]].values.tolist() == [["a", 1]]


def test_a_value_names_its_state_format_older_ones_migrate_as_they_are_read_newer_ones_are_refused(monkeypatch):
    snapshot = b"a snapshot in format 2"
    blob = state_codec.encode(snapshot)
    assert blob.startswith(b"fmz2") and state_codec.value_format(blob) == 2 == state_codec.FORMAT
    assert state_codec.value_format(state_codec.encode(snapshot, state_format=1)) == 1
    assert state_codec.value_format(snapshot) == 0, "a value without the header is format 0 (uncompressed)"

    # A floodmark whose format 3 changed the snapshot: format 0 to 2 values migrate when read, 3 is written.
    monkeypatch.setattr(state_codec, "FORMAT", 3)
    monkeypatch.setattr(state_codec, "MIGRATIONS", {2: lambda old: old.replace(b"format 2", b"format 3")})
    assert state_codec.decode(blob) == b"a snapshot in format 3"
    assert state_codec.decode(snapshot) == b"a snapshot in format 3", "format 0 -> 1 -> 2 (no change) -> 3"
    assert state_codec.value_format(state_codec.encode(b"x")) == 3

    # The floodmark of format 2 again, given a value of format 3.
    newer = state_codec.encode(b"x")
    monkeypatch.setattr(state_codec, "FORMAT", 2)
    with pytest.raises(state_codec.StateFormatError, match=r"state format 3; .* reads formats 0 to 2"):
        state_codec.decode(newer)


def test_a_checkpoint_records_its_state_formats_and_one_written_by_a_newer_format_is_refused(tmp_path, monkeypatch):
    files, checkpoint = LocalFiles(), str(tmp_path / "ckpt")
    assert check_state_format(files, checkpoint, existing=False) == 2, "a new checkpoint stores buckets in parts"
    record = json.loads((tmp_path / "ckpt" / "floodmark" / "state-format-2.json").read_text())
    assert record == {"state_format": 2, "floodmark": floodmark.__version__}
    assert check_state_format(files, checkpoint, existing=True) == 2  # a restart by the same floodmark

    older = str(tmp_path / "older")
    assert check_state_format(files, older, existing=True) == 1, "created before formats were recorded: one value"
    assert check_state_format(files, older, existing=True) == 1, "and it stays so"

    monkeypatch.setattr(state_codec, "FORMAT", 3)
    monkeypatch.setattr(checkpoint_records, "__version__", "9.9.0")
    assert check_state_format(files, checkpoint, existing=True) == 3  # an upgrade: recorded beside format 2
    assert sorted(p.name for p in (tmp_path / "ckpt" / "floodmark").iterdir()) == [
        "state-format-2.json",
        "state-format-3.json",
    ]
    monkeypatch.setattr(state_codec, "FORMAT", 2)  # and back to the older floodmark: refused before it starts
    with pytest.raises(state_codec.StateFormatError, match=r"format 3 \(written by floodmark 9.9.0\)"):
        check_state_format(files, checkpoint, existing=True)


def test_blocks_carry_each_buckets_rows_in_order_and_convert_as_spark_does():
    table = pa.table(
        {
            p.BUCKET: pa.array([3, 1, 3, 0, 1], pa.int32()),
            "id": pa.array([1, None, 3, 4, 5], pa.int64()),
            "at": pa.array([0, 1_000_000, None, 3, 4], pa.timestamp("us", tz="UTC")),
        }
    )
    packed = blocks.pack(table)
    assert packed.column(p.BUCKET).to_pylist() == [0, 1, 3]
    by_bucket = dict(zip(packed.column(p.BUCKET).to_pylist(), packed.column(blocks.BLOCK).to_pylist(), strict=True))
    three = blocks.unpack([by_bucket[3]])
    assert three["id"].tolist() == [1, 3] and three["id"].dtype == np.int64, "arrival order kept"
    one = blocks.unpack([by_bucket[1]])
    assert one["id"].dtype == np.float64, "integers with nulls as float64, as Spark's conversion gives them"
    assert one["at"].dt.tz is None and str(one["at"].iloc[0]) == "1970-01-01 00:00:01", "naive session time"
    both = blocks.unpack([by_bucket[0], by_bucket[1]])
    assert both[p.BUCKET].tolist() == [0, 1, 1]
    # Blocks from several input partitions are read in partition order, whatever order Spark delivers them in.
    later = blocks.pack(table.slice(0, 1), partition=7).column(blocks.BLOCK).to_pylist()[0]
    earlier = blocks.pack(table.slice(2, 1), partition=2).column(blocks.BLOCK).to_pylist()[0]
    assert blocks.unpack([later, earlier])["id"].tolist() == [3, 1]
    assert blocks.pack(table.slice(0, 0)).num_rows == 0 and blocks.unpack([]).empty


def test_a_bucket_without_input_and_nothing_due_returns_at_once_and_keeps_its_state():
    """Its last report travels in the entry (``ControlEntry.buckets``); the driver keeps it (``BucketGauges``)."""
    processor = make_processor()
    call(processor, [(1, "a", 1.0, 0), (12, "b", 2.0, 0)], seq=0, watermark=-(2**63), ptime=100)
    gauge = call(processor, [], seq=1, watermark=0, ptime=200).query("fm_kind == @p.GAUGE").iloc[0]
    assert gauge["fm_next_fire"] == 9, "a bucket whose report the entry lacks runs"
    stored = processor.state.value
    report = [gauge[name] for name in ("fm_hold", "fm_oldest_pending", "fm_open_windows", "fm_next_fire")]
    buckets = {f"{STAGE_NAME}/0": [*(None if pd.isna(v) else int(v) for v in report), None]}

    def tick(watermark):
        processor.current_entry = lambda: entry(2, watermark, 300, buckets=buckets)
        (out,) = list(processor.level((STAGE_NAME, 0), iter([tick_row()]), processor.state))
        return unpacked(processor, out)

    assert tick(8).empty and processor.state.value == stored, "nothing due below the bucket's deadline: no rows"
    fired = tick(9)
    assert fired.query("fm_kind == @p.PANE")[["k", "window_end"]].values.tolist() == [["a", 10]]
    assert processor.state.value != stored
