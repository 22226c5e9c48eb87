"""Bucket labels: Spark's hash restated exactly, buckets dealt evenly, the layout fixed per checkpoint."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from floodmark.driver.checkpoint_files import LocalFiles
from floodmark.spark.stateful import bucket_layout, spark_hash
from floodmark.spark.stateful.bucket_layout import BucketLayout, partition_of
from floodmark.spark.stateful.spark_hash import murmur3_int, murmur3_string

INTS = [0, 1, 2, 7, 8, 42, -1, -42, 2**31 - 1, -(2**31), 123_456_789]
TEXTS = ["", "a", "ab", "abc", "abcd", "abcde", "sessions", "means-per-user", "é", "stage ü 名前", "😀x"]


def test_the_hash_is_sparks_own(spark):
    rows = spark.createDataFrame(
        [(v, t) for v in INTS for t in TEXTS],
        StructType([StructField("v", IntegerType()), StructField("t", StringType())]),
    )
    got = rows.select("v", "t", F.hash("v").alias("hv"), F.hash("t").alias("ht"), F.hash("t", "v").alias("htv"))
    for row in got.collect():
        assert row.hv == murmur3_int(row.v), row
        assert row.ht == murmur3_string(row.t), row
        assert row.htv == murmur3_int(row.v, murmur3_string(row.t)), row


LONGS = [0, 1, -1, 2**31, -(2**31) - 1, 2**40 + 7, 2**63 - 1, -(2**63), 1_700_000_000_000]


def test_the_hash_of_rows_of_several_types_is_sparks_own(spark):
    """What bucketing a stage's panes for a join that also reads a source needs: a row's hash over its key columns
    of Spark types long, int, tinyint, boolean and string, nulls included."""
    types = ["bigint", "int", "tinyint", "boolean", "string"]
    values = [
        (v, i, i % 100 if i is not None else None, bool(i % 2) if i is not None else None, t)
        for v, i, t in zip(LONGS * 3, [*INTS, None] * 3, [*TEXTS, None] * 3, strict=False)
    ]
    rows = spark.createDataFrame(values, "l bigint, i int, b tinyint, z boolean, t string")
    got = rows.select("*", F.hash("l").alias("hl"), F.hash("l", "i", "b", "z", "t").alias("hall")).collect()
    assert len(got) == len(values)
    for row in got:
        assert row.hl == spark_hash.murmur3_long(row.l), row
        assert row.hall == spark_hash.spark_hash((row.l, row.i, row.b, row.z, row.t), types), row


@pytest.mark.parametrize("partitions", [2, 3])
def test_spark_puts_each_group_in_the_partition_the_layout_says(spark, partitions):
    layout = BucketLayout.balanced(8, partitions, ["a", "b"])
    rows = [("a", v) for v in layout.of("a")] + [("b", v) for v in layout.of("b")]
    frame = spark.createDataFrame(rows, "stage string, fm_bucket int")
    placed = frame.repartition(partitions, "stage", "fm_bucket").select("*", F.spark_partition_id().alias("part"))
    for row in placed.collect():
        assert row.part == partition_of(row.fm_bucket, partitions, row.stage)


@pytest.mark.parametrize(
    ("count", "partitions", "stages", "per_partition"),
    [
        (8, 2, ["aggregation"], [4, 4]),  # labels 0..7 would land 3:5
        (8, 4, ["aggregation"], [2, 2, 2, 2]),  # labels 0..7 would land 0:1:3:4
        (5, 2, ["aggregation"], [3, 2]),
        (8, 1, ["aggregation"], [8]),
        (3, 2, ["a", "b"], [3, 3]),  # dealt across stages: a gets 2:1, b 1:2
        (200, 200, ["aggregation"], [1] * 200),
    ],
)
def test_buckets_are_dealt_evenly(count, partitions, stages, per_partition):
    layout = BucketLayout.balanced(count, partitions, stages)
    placed = Counter(partition_of(v, partitions, s) for s in stages for v in layout.of(s))
    assert [placed[i] for i in range(partitions)] == per_partition
    for stage in stages:
        assert len(set(layout.of(stage))) == count  # distinct labels


def test_numbered_buckets_land_unevenly_which_is_why_labels_exist():
    assert Counter(partition_of(v, 2, "aggregation") for v in range(8)) == {0: 5, 1: 3}
    assert Counter(partition_of(v, 4, "aggregation") for v in range(8)) == {2: 3, 0: 2, 3: 2, 1: 1}


def test_a_checkpoint_keeps_its_layout_across_restarts(tmp_path):
    files, checkpoint = LocalFiles(), str(tmp_path)
    first = bucket_layout.fixed(files, checkpoint, None, 8, 2, ["s"])
    assert first == BucketLayout.balanced(8, 2, ["s"])
    # Restarted with other settings: Spark keeps the checkpoint's partitions, floodmark its labels.
    assert bucket_layout.fixed(files, checkpoint, None, 16, 4, ["s"]) == first
    assert bucket_layout.fixed(files, checkpoint, 8, 16, 4, ["s"]) == first
    with pytest.raises(ValueError, match=r"keeps its state in 8 buckets; buckets=12 cannot resume it"):
        bucket_layout.fixed(files, checkpoint, 12, 16, 4, ["s"])
    with pytest.raises(ValueError, match=r"no state buckets for stage\(s\) \['extra'\]"):
        bucket_layout.fixed(files, checkpoint, None, 8, 2, ["s", "extra"])
    stored = json.loads((tmp_path / "floodmark" / "buckets.json").read_text())
    assert stored == {"partitions": 2, "labels": {"s": list(first.of("s"))}}


def test_a_checkpoint_from_before_layouts_keeps_buckets_0_to_b(tmp_path):
    layout = bucket_layout.fixed(LocalFiles(), str(tmp_path), None, 8, 2, ["a", "b"], existing=True)
    assert layout == BucketLayout.numbered(8, ["a", "b"])
    assert bucket_layout.fixed(LocalFiles(), str(tmp_path), None, 8, 2, ["a", "b"]) == layout
