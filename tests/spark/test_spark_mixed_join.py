"""A join of a source and a stage on Spark: each click enriched with the per-user counts of the windows that close
within 20 s after it. Spark buckets the clicks by its hash of the key; the stage's panes are forwarded in Python and
bucketed by the same hash, so a user's clicks and panes meet in one bucket whatever the bucket count. Held to a
straight computation over the clicks and the stage's panes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.apps.outputs import read_output
from floodmark.spark import Pipeline, SourceTime, read_files_in_order, read_json_lines

pytestmark = pytest.mark.spark

SECOND = 1_000
WITHIN = 20 * SECOND


def _write_clicks(folder: Path, user_type: str) -> pd.DataFrame:
    """Six files of clicks by 7 users over two minutes, in order within a file, 2 s out of order across them."""
    folder.mkdir(parents=True)
    rows = []
    for f in range(6):
        for i in range(40):
            ts = f * 20 * SECOND + i * 500 - (2 * SECOND if i % 9 == 0 else 0)
            user = i * 7 % 13 % 7
            rows.append({"ts": max(ts, 0), "user": f"u{user}" if user_type == "string" else user, "file": f})
    clicks = pd.DataFrame(rows)
    for f, part in clicks.groupby("file"):
        lines = [json.dumps({"ts": int(r.ts), "user": r.user}) for r in part.itertuples()]
        (folder / f"part-{f:02d}.jsonl").write_text("\n".join(lines) + "\n")
    return clicks.drop(columns="file")


@pytest.mark.parametrize(("user_type", "host"), [("string", "jvm"), ("bigint", "python")])
def test_a_join_of_a_source_and_a_stage_pairs_every_click_with_its_users_later_panes(spark, tmp_path, user_type, host):
    """The window stage on either host (the JVM host's level passes the join's source rows through)."""
    clicks = _write_clicks(tmp_path / "in", user_type)
    pipeline = Pipeline(buckets=3, host=host)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=3))
    schema = f"ts LONG, user {user_type.upper()}"
    frame = read_files_in_order(spark, tmp_path / "in", order="path", files_per_batch=1, schema=schema)
    pipeline.source("clicks", frame, "ts", SourceTime(strategy))
    spec = WindowSpec(windows.Tumbling(timedelta(seconds=10)), {"count": aggregates.count()})
    pipeline.stage("per_user", "clicks", spec, key_by="user")
    pipeline.join("enriched", "clicks", "per_user", on="user", between=(0, WITHIN))
    query = pipeline.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=600)

    panes = read_output(tmp_path / "out" / "per_user", "panes")
    joined = read_output(tmp_path / "out" / "enriched", "panes")
    pane_times = panes.assign(time=panes["window_end"] - 1)[["user", "time", "count"]]
    expected = clicks.merge(pane_times, on="user")
    expected = expected[(expected["time"] >= expected["ts"]) & (expected["time"] <= expected["ts"] + WITHIN)]
    want = sorted(zip(expected["user"], expected["ts"], expected["time"], expected["count"], strict=True))
    got = sorted(
        zip(joined["user"], joined["left_ts"], joined["right_pane_timestamp"], joined["right_count"], strict=True)
    )
    assert len(want) > 300 and got == want, "every click paired once with each pane of its user within 20 s"
    assert sum(r.late for r in query.reports) == 0
    reconciled = query.stage_reconciliation("enriched")
    assert reconciled.input_rows == len(clicks) + len(panes), "the clicks and the stage's panes, each counted once"


def test_a_join_of_a_source_and_a_stage_refuses_key_columns_of_two_types(spark, tmp_path):
    _write_clicks(tmp_path / "in", "string")
    pipeline = Pipeline(host="python")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=3))
    frame = read_json_lines(spark, str(tmp_path / "in"), "ts LONG, user STRING")
    pipeline.source("clicks", frame, "ts", SourceTime(strategy))
    spec = WindowSpec(windows.Tumbling(timedelta(seconds=10)), {"count": aggregates.count()})
    pipeline.stage("per_user", "clicks", spec, key_by="user")
    pipeline.source("ints", frame.selectExpr("ts", "length(user) AS user"), "ts", SourceTime(strategy))
    pipeline.join("enriched", "ints", "per_user", on="user", between=(0, WITHIN))
    with pytest.raises(ValueError, match="reads key column 'user' as"):
        pipeline.start(str(tmp_path / "ckpt"), str(tmp_path / "out"))
    with pytest.raises(ValueError, match="a window or process stage reads either sources or stages"):
        pipeline.stage("mixed", ["clicks", "per_user"], spec, key_by="user")
