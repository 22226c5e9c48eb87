"""The JVM host's Python text rules (``floodmark.host.PythonJson`` and ``RecordRules`` in floodmark's jar) against
Python itself.

A late record's or dead letter's ``record`` is JSON text that the Python host writes with ``json.dumps`` (floats
by ``repr``, ``ensure_ascii``, NaN as null: ``floodmark.core.values.plain``), and a reason quotes raw text with
``repr``: the JVM host writes the same text by those rules, and finds a bad record's reason by the Arrow
combiner's (``MapSideCombiner._validate``). Random doubles (any bit pattern) and strings (any
code point) go through both; the answers must be equal to the character. So must the rule that runs a bucket
without input (``ControlEntry.due``) and the one that takes a task's control entry (``ControlEntry.forBatch``). Runs a
plain JVM, no Spark.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from floodmark import WindowSpec, aggregates, windows
from floodmark.core.time import EARLIEST_EVENT_TIME, LATEST_EVENT_TIME
from floodmark.core.values import plain
from floodmark.jvm import java_executable, packaged_jars
from floodmark.protocol import wire
from floodmark.protocol.control import ControlEntry
from floodmark.spark import batch_entry
from floodmark.spark import plan as p
from floodmark.spark.map_side.combiner import MapSideCombiner
from floodmark.spark.stateful import bucket_host

CORRUPT = "_corrupt_record"


@pytest.fixture(scope="module")
def python_json():
    jars = packaged_jars()
    found = importlib.util.find_spec("pyspark")
    if not jars or found is None or found.origin is None:
        pytest.skip("floodmark's jar is not built (scripts/setup.sh needs Maven)")
    path = ":".join([*map(str, jars), str(Path(found.origin).parent / "jars" / "*")])
    process = subprocess.Popen(
        [java_executable(), "-cp", path, "floodmark.host.PythonJsonMain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )

    def ask(command: dict) -> dict:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(command) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    yield ask
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


EDGES = [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 0.1, 5e-324, 1.7976931348623157e308, 2.5e-7, 1e22]


@settings(max_examples=2_000, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGES)))
def test_doubles_are_written_as_python_writes_them(python_json, value):
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    assert python_json({"double_bits": bits})["json"] == json.dumps(plain(value))


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cn"]), max_size=12)
"""Any text but lone surrogates (not UTF-8) and unassigned characters (``PythonJson.repr`` prints those that the
JVM's older Unicode tables leave unassigned and Python's assign; Python escapes the ones it does not know)."""


@settings(max_examples=1_000, deadline=None)
@given(
    st.one_of(
        TEXT,
        st.sampled_from(["", "'", '"', "'\"", "a'b", "\x7f\x80\xa0\xad", "\u2028\u3000日本", "\U0001f600"]),
        # Format characters Unicode assigned after the JVM 17's tables (13): Python escapes them.
        st.sampled_from(["\u0890", "a\u0891b", "\U00013439", "\U0001343f"]),
    )
)
def test_text_is_quoted_and_escaped_as_python_does(python_json, text):
    answer = python_json({"text": text})
    assert answer["repr"] == repr(text)
    assert answer["json"] == json.dumps(text)


SCHEMA = StructType(
    [StructField(name, t) for name, t in (("k", StringType()), ("v", DoubleType()), ("w", DoubleType()))]
    + [StructField(CORRUPT, StringType())]
)
SPEC = WindowSpec(windows.Tumbling(10), {"total": aggregates.sum("v"), "high": aggregates.max("w")})
values = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=500, deadline=None)
@given(
    corrupt=st.booleans(),
    ts=st.one_of(
        st.none(),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 2**42),  # near processing time: ahead of it or not, each time written as ISO text
        st.sampled_from([EARLIEST_EVENT_TIME - 1, EARLIEST_EVENT_TIME, LATEST_EVENT_TIME, LATEST_EVENT_TIME + 1]),
    ),
    raw=st.one_of(st.none(), TEXT),
    error=st.one_of(st.none(), TEXT),
    processing_time=st.integers(0, 2**41),
    skew=st.one_of(st.none(), st.integers(0, 2**40), st.integers(0, 100_000)),  # the skew as a duration: ms, s, d
    v=values,
    w=values,
)
def test_a_bad_records_reason_is_the_combiners(python_json, corrupt, ts, raw, error, processing_time, skew, v, w):
    """``RecordRules`` (the JVM host's check of the records the JVM map side leaves alone) against the Arrow
    combiner's own ``_validate``: the same first reason, or none, for one record."""
    plan = p.RuntimePlan.for_input(SPEC, SCHEMA, ["k"], None, None, False, skew, CORRUPT)
    row = pa.table(
        {
            "k": ["a"],
            "v": pa.array([v], pa.float64()),
            "w": pa.array([w], pa.float64()),
            CORRUPT: pa.array(["{broken" if corrupt else None], pa.string()),
            p.TS: pa.array([ts], pa.int64()),
            p.TS_RAW: pa.array([raw], pa.string()),
            p.TS_ERROR: pa.array([error], pa.string()),
        }
    )
    combiner = MapSideCombiner(plan, SCHEMA)
    timestamps = pc.fill_null(row.column(p.TS), 0).to_numpy()
    _, _, reasons, _ = combiner._validate(row, timestamps, processing_time)

    def bits(value: float | None) -> int:
        return struct.unpack("<q", struct.pack("<d", math.nan if value is None else value))[0]

    numbers = [[name, bits({"v": v, "w": w}[name])] for name in plan.stage.numeric_fields]
    command = {
        "earliest": EARLIEST_EVENT_TIME,
        "latest": LATEST_EVENT_TIME,
        "max_future_skew": skew,
        "corrupt": corrupt,
        "ts": ts,
        "raw": raw,
        "error": error,
        "processing_time": processing_time,
        "numbers": numbers,
    }
    assert python_json({"reason": command})["reason"] == reasons[0]


gauge = st.one_of(st.none(), st.integers(-5, 5))
report = st.tuples(gauge, gauge, gauge, gauge, gauge).map(list)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["s/0", "s/1", "t/0", "t/2"]), report, max_size=4),
    st.integers(-5, 5),
    st.integers(-5, 5),
    st.sampled_from(["s", "t"]),
    st.integers(0, 2),
)
def test_a_bucket_without_input_runs_when_the_python_host_would(python_json, buckets, watermark, now, stage, bucket):
    """``ControlEntry.due`` (whether the JVM host runs a bucket that got no input: it has not reported yet, or its
    watermark or processing-time deadline is reached) against the Python host's ``bucket_host.due``, on entries as
    the driver publishes them (``batch_entry.encode``)."""
    entry = ControlEntry(
        seq=7,
        watermark=watermark,
        processing_time=now,
        stage_watermarks={"s": watermark, "t": watermark - 1},
        buckets=buckets,
    )
    at = {"next_fire_at": wire.GAUGES.index(wire.NEXT_FIRE), "next_timer_at": wire.GAUGES.index(wire.NEXT_TIMER)}
    command = {"entry": batch_entry.encode(entry), "stage": stage, "bucket": bucket, **at}
    assert python_json({"due": command})["due"] == bucket_host.due(entry, stage, bucket)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), st.integers(0, 2**40)),
    st.one_of(st.none(), st.integers(0, 2**40)),
    st.booleans(),
)
def test_a_task_takes_the_entry_the_python_host_would(python_json, seq, batch_id, near):
    """``ControlEntry.forBatch`` (the JVM host's task: the published entry, which must be its batch's when Spark
    gave the task a batch id; none over Spark Connect) against the Python host's ``batch_entry.entry_for_batch``:
    the same entry taken, or the same refusal to the character."""
    if near and seq is not None and batch_id is not None:
        batch_id = seq  # the common case: the entry is the batch's
    text = None if seq is None else batch_entry.encode(ControlEntry(seq=seq, watermark=0, processing_time=0))
    answer = python_json({"for_batch": {"text": text, "batch_id": None if batch_id is None else str(batch_id)}})
    try:
        expected = {"seq": batch_entry.entry_for_batch(text, batch_id).seq}
    except RuntimeError as refused:
        expected = {"refused": str(refused)}
    assert answer == expected
