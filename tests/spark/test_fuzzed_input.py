"""Fuzzed input through the README's kind of pipeline (JSON files, sliding windows, max_future_skew) on Spark.

Issue 15: such a run died in its second batch on a record near the int64 edge. Here 100,000 lines of every
bad class go through a bounded run: the query finishes, every row is accounted for (the run's reconciliation
count against what was written and against the generator's own classification), unparsable lines keep their
text, and no RuntimeWarning is raised in Spark's Python workers (they run with warnings as errors).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from spark_helpers import read_output

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import EventTimeAggregation, SourceTime, read_json_lines
from floodmark.spark.map_side.combiner import UNPARSABLE as UNPARSABLE_REASON
from floodmark.spark.plan import TEXT, corrupt_record_column

pytestmark = pytest.mark.spark

MINUTE = 60_000
LINES_PER_FILE = 25_000
FILES = 4
USERS = ["alice", "bob", "", "\u00e9l\u00e8ve", "\u6f22\u5b57", "\U0001f642", "a\tb", 'quote"d']


def line_for(kind: str, rng: random.Random, ts: int) -> str:
    """One input line of class ``kind`` (event time ``ts`` where it has one)."""
    record = {"ts": ts, "user": rng.choice(USERS), "split": rng.randrange(4), "v": rng.uniform(-100, 100)}
    match kind:
        case "good":
            pass
        case "null_key":
            record["user"] = None
        case "null_split":
            record["split"] = None
        case "huge_value":
            record["v"] = rng.choice([1e308, -1e308, 2.0**62, 9223372036854775807])
        case "truncated":
            text = json.dumps(record, ensure_ascii=False)
            return text[: rng.randrange(1, len(text) - 1)]
        case "not_json":
            return rng.choice(["hello world", "<record/>", "ts=1,user=x", "[1, 2", "\u00ff\u00fe garbage"])
        case "ts_text":
            record["ts"] = "yesterday"
        case "ts_object":
            record["ts"] = {"ms": ts}
        case "ts_fraction":
            record["ts"] = ts + 0.5
        case "v_text":
            record["v"] = "abc"
        case "ts_missing":
            del record["ts"]
        case "ts_null":
            record["ts"] = None
        case "empty_object":
            return "{}"
        case "v_missing":
            del record["v"]
        case "v_nan":
            return json.dumps(record).replace(f'"v": {json.dumps(record["v"])}', '"v": NaN')
        case "v_infinity":
            return json.dumps(record).replace(f'"v": {json.dumps(record["v"])}', '"v": -Infinity')
        case "ts_int64_min":
            record["ts"] = -(2**63)
        case "ts_int64_max":
            record["ts"] = 2**63 - 1
        case "ts_year_5000":
            record["ts"] = 95_617_584_000_000
        case "ts_before_year_1":
            record["ts"] = -62_135_596_800_001
        case "late":
            pass
    return json.dumps(record, ensure_ascii=False)


GOOD = ["good", "null_key", "null_split", "huge_value"]
BAD = [
    "truncated",
    "not_json",
    "ts_text",
    "ts_object",
    "ts_fraction",
    "v_text",
    "ts_missing",
    "ts_null",
    "empty_object",
    "v_missing",
    "v_nan",
    "v_infinity",
    "ts_int64_min",
    "ts_int64_max",
    "ts_year_5000",
    "ts_before_year_1",
]
UNPARSABLE = {"truncated", "not_json", "ts_text", "ts_object", "ts_fraction", "v_text"}
REFUSED = {"v_missing", "v_nan", "v_infinity"}
"""Records of the source (a usable event time) that the stage cannot use: its aggregated number is not one."""


def write_fuzzed_files(directory: Path, base: int, seed: int = 15) -> tuple[Counter, dict[str, str]]:
    """``FILES`` files of ``LINES_PER_FILE`` lines; file k's good records in [base + 10k min, base + 10(k+1) min).

    Returns the count per class and, for the unparsable lines, each line's text -> its class.
    """
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    kinds: Counter = Counter()
    unparsable: dict[str, str] = {}
    start = time.time() - 1_000
    for k in range(FILES):
        lines = []
        for _ in range(LINES_PER_FILE):
            roll = rng.random()
            if roll < 0.80:
                kind = rng.choice(GOOD)
            elif roll < 0.82 and k >= 2:
                kind = "late"  # the windows around base - 5 min closed batches ago
            else:
                kind = rng.choice(BAD)
            ts = base - 5 * MINUTE if kind == "late" else base + k * 10 * MINUTE + rng.randrange(10 * MINUTE)
            line = line_for(kind, rng, ts)
            kinds[kind] += 1
            if kind in UNPARSABLE:
                unparsable[line] = kind
            lines.append(line)
        path = directory / f"part-{k:02d}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, (start + k, start + k))
    return kinds, unparsable


def test_fuzzed_lines_never_stop_the_query_and_every_row_is_accounted_for(spark, tmp_path):
    base = (int(time.time() * 1000) - 24 * 3_600_000) // MINUTE * MINUTE  # yesterday, on a minute
    kinds, unparsable = write_fuzzed_files(tmp_path / "in", base)
    corrupt = corrupt_record_column(spark)
    stream = (
        spark.readStream.schema(f"ts LONG, user STRING, split INT, v DOUBLE, {corrupt} STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    agg = EventTimeAggregation(
        stream,
        event_time="ts",
        key_by=["user"],
        spec=WindowSpec(
            windows.Sliding(2 * MINUTE, MINUTE),
            {"n": aggregates.count(), "total": aggregates.sum("v"), "hi": aggregates.max("v")},
        ),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000), split="split"),
        max_future_skew=3_600_000,
    )
    # Spark's Python workers take their environment from the context's; with warnings as errors a numpy
    # RuntimeWarning (overflow, invalid cast) fails the query instead of reaching the console.
    environment = spark.sparkContext.environment
    environment["PYTHONWARNINGS"] = "error::RuntimeWarning"
    try:
        query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=600)
    finally:
        del environment["PYTHONWARNINGS"]

    counts = query.reconciliation
    lines = FILES * LINES_PER_FILE
    expected_bad = sum(kinds[k] for k in BAD if k not in REFUSED)
    refused = sum(kinds[k] for k in REFUSED)
    expected_records = lines - expected_bad
    print(f"\n{counts.describe()}\nclasses: {dict(sorted(kinds.items()))}")
    assert counts.rows_in == lines
    assert counts.dead_letters == expected_bad, "lines that are no record"
    assert counts.stage_dead_letters == refused, "records whose aggregated number the stage cannot use"
    assert counts.records == expected_records
    used = expected_records - refused
    assert counts.window_pairs == 2 * used, "every record used is in two 2-minute windows sliding by 1"
    assert counts.late == 2 * kinds["late"]

    out = tmp_path / "out"
    panes = read_output(spark, out / "panes")
    late = read_output(spark, out / "late")
    dead = read_output(spark, out / "dead_letter")
    assert int(panes["n"].sum()) == counts.in_windows
    assert len(late) == counts.late and set(late["reason"]) == {"EXPIRED"}
    assert len(dead) == counts.dead_letters + counts.stage_dead_letters
    assert dead["reason"].notna().all() and (dead["reason"] != "").all()
    assert panes["user"].isna().any(), "a record with a null key is counted in a pane of the null key"
    assert set(USERS) <= set(panes["user"].dropna())

    # Lines that are not records keep their text; the rest are sorted by reason.
    texts = Counter(unparsable[r] for r in dead["record"] if r in unparsable)
    assert sum(texts.values()) == sum(kinds[k] for k in UNPARSABLE)
    reasons = Counter(
        "unparsable"
        if r.startswith("unparsable input")
        else "missing timestamp"
        if r == "missing timestamp"
        else "range"
        if "outside the supported event-time range" in r
        else "skew"
        if "ahead of processing time" in r
        else "v missing"
        if r == "field 'v' is missing"
        else "v not finite"
        if r.startswith("field 'v' is not a finite number")
        else r
        for r in dead["reason"]
    )
    assert reasons == {
        "unparsable": sum(kinds[k] for k in UNPARSABLE),
        "missing timestamp": kinds["ts_missing"] + kinds["ts_null"] + kinds["empty_object"],
        "range": kinds["ts_int64_min"] + kinds["ts_before_year_1"],
        "skew": kinds["ts_int64_max"] + kinds["ts_year_5000"],
        "v missing": kinds["v_missing"] + kinds["v_nan"],
        "v not finite": kinds["v_infinity"],
    }
    overflowing = panes[panes["total"].abs() == float("inf")]
    assert len(overflowing), "sums of 1e308 values overflow to infinity (IEEE doubles), they do not wrap"


# Lines that parse but are not usable records, written as no re-serialisation would write them back (spacing,
# key order, number forms, a field that is not in the schema, non-ASCII), with the reason of their dead letter.
ORIGINAL_LINES = {
    '{ "k":"a",   "ts" : 1000 }': "field 'temperature' is missing",
    '{"temperature": 1.50e0,"k": "b"}': "missing timestamp",
    '{"k": "\u00e9t\u00e9", "ts": 2000, "note": {"x": [1, 2]}}': "field 'temperature' is missing",
    '{"ts": 3000, "k": "d", "temperature": "warm"}': UNPARSABLE_REASON,
    "not json": UNPARSABLE_REASON,
}


def test_read_json_lines_gives_each_dead_letter_its_line_as_it_came(spark, tmp_path):
    """Issue 26: a line that parses but lacks a field is its dead letter's record byte for byte, not the
    parsed columns written back as JSON; blank lines are skipped, as by Spark's JSON reader."""
    directory = tmp_path / "in"
    directory.mkdir()
    lines = ['{"ts": 1500, "k": "c", "temperature": 2.5}', *ORIGINAL_LINES, "   ", ""]
    (directory / "part-0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    schema = "ts LONG, k STRING, temperature DOUBLE"
    with pytest.raises(ValueError, match="read_json_lines adds itself"):
        read_json_lines(spark, str(directory), f"{schema}, {TEXT} STRING")
    agg = EventTimeAggregation(
        read_json_lines(spark, str(directory), schema),
        event_time="ts",
        key_by=["k"],
        spec=WindowSpec(windows.Tumbling(MINUTE), {"n": aggregates.count(), "mean": aggregates.mean("temperature")}),
        time=SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(1_000)),
    )
    assert agg.plan.input.text_column == TEXT and TEXT not in agg.plan.input.user_columns
    query = agg.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)

    assert query.reconciliation.rows_in == 1 + len(ORIGINAL_LINES), "the blank lines are not rows"
    dead = read_output(spark, tmp_path / "out" / "dead_letter")
    assert dict(zip(dead["record"], dead["reason"], strict=True)) == ORIGINAL_LINES
    panes = read_output(spark, tmp_path / "out" / "panes")
    assert panes[["k", "n", "mean"]].values.tolist() == [["c", 1, 2.5]]
    assert TEXT not in panes.columns and TEXT not in dead.columns
