"""A keyed process function on Spark that misbehaves: a call that raises, a row that does not fit the declared
output, processing-time timers (issue 42). None of it stops the query: each bad call or row is a dead letter with
its reason, the rest of the key's work goes on; the timers fire in a later batch, on the driver's clock."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from pyspark import cloudpickle
from spark_helpers import read_output, write_batches

from floodmark import ProcessContext, Timer, WatermarkStrategy
from floodmark.spark import Pipeline, SourceTime

pytestmark = pytest.mark.spark

# The executors get the function pickled by value (this module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Picky:
    """Counts a device's readings and emits the count one batch later (a processing-time timer 1 ms ahead);
    raises on a negative reading and emits a row that does not fit on a reading of 99."""

    def process(self, record: dict, ctx: ProcessContext) -> None:
        if record["v"] < 0:
            raise ValueError(f"negative reading {record['v']}")
        if record["v"] == 99:
            ctx.emit({"readings": "ninety-nine"})  # not a long: a dead letter
        ctx.state["readings"] = ctx.state.get("readings", 0) + 1
        ctx.set_processing_timer(ctx.processing_time + 1)

    def on_timer(self, timer: Timer, ctx: ProcessContext) -> None:
        ctx.emit({"readings": ctx.state["readings"]})


def test_a_misbehaving_function_makes_dead_letters_and_its_processing_timers_fire(spark, tmp_path):
    batches = [
        [("a", 1_000, 5), ("b", 1_500, -1), ("a", 2_000, 99)],
        [("b", 3_000, 7), ("a", 4_000, 6)],
    ]
    folder = tmp_path / "in"
    write_batches(folder, [pd.DataFrame(rows, columns=["device", "ts", "v"]) for rows in batches])
    pipeline = Pipeline(buckets=2)
    frame = (
        spark.readStream.schema("device STRING, ts LONG, v LONG").option("maxFilesPerTrigger", 1).parquet(str(folder))
    )
    pipeline.source("readings", frame, "ts", SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(0)))
    pipeline.process("counts", "readings", Picky(), {"readings": "long"}, key_by="device")
    query = pipeline.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=300)

    dead = read_output(spark, tmp_path / "out" / "counts" / "dead_letter").sort_values("event_time")
    assert dead["device"].tolist() == ["b", "a"]
    assert "process raised ValueError: negative reading -1" in dead["reason"].iat[0]
    assert json.loads(dead["record"].iat[0]) == {"device": "b", "ts": 1_500, "v": -1}
    assert dead["reason"].iat[1].startswith("the row does not fit the stage's output: column 'readings'")
    rows = read_output(spark, tmp_path / "out" / "counts" / "panes")
    # Each timer fires once, in a batch after the one that set it, with the count as it stands then.
    fired = sorted(zip(rows["device"], rows["readings"], rows["batch_id"], strict=True))
    assert [(d, n) for d, n, _ in fired] == [("a", 2), ("a", 3), ("b", 1)]
    assert all(b >= 1 for _, _, b in fired)
    reconciled = query.stage_reconciliation("counts")
    # Five records reached the function; its two dead letters are a call's and a row's (not input rows).
    assert (reconciled.records, reconciled.dead_letters, reconciled.in_windows) == (5, 2, 5), reconciled.describe()
