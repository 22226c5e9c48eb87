"""The interval join and keyed process functions as stages of a Spark ``Pipeline`` (issue 42): search queries
joined to the clicks that follow them (seed 003's example of output times), then 30-second windows over the joined
rows; beside them, each user's abandoned searches found by event-time timers, then windows over those.

Two sources over three splits each, out of order within a split (3 s), a clicks split that goes quiet halfway
(idle after 2 s), 3% of the clicks 25 s behind the rest (late for the join). Each run reads the same files, one per
source and batch: the core's ``MicroBatchPipeline`` is the reference, the pairs computed straight from the records
the oracle.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from spark_helpers import read_output
from test_spark_recovery import kill_after, run_driver
from typer.testing import CliRunner

from floodmark.apps import searches as app
from floodmark.apps.cli import app as app_cli
from floodmark.apps.join_advisor import pairs_within
from floodmark.apps.outputs import read_folder
from floodmark.core.pipeline import MicroBatchPipeline
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.windows import Window
from floodmark.explain.rows import TimeStatus
from floodmark.simulator import searches

pytestmark = pytest.mark.spark

CONFIG = searches.SearchConfig()
KINDS = [("inner", "RIGHT"), ("left", "LEFT")]
JOIN_DRIVER = Path(__file__).with_name("join_driver.py")


BAD_QUERY = 40
"""The query written without an event time: a dead letter of the join, never joined."""


@pytest.fixture(scope="module")
def search_input(tmp_path_factory):
    records = searches.generate(CONFIG)
    queries = records["queries"].astype({"ts": "Int64"})
    queries.loc[BAD_QUERY, "ts"] = pd.NA
    records["queries"] = queries
    directory = tmp_path_factory.mktemp("searches")
    app.write_input(records, directory / "in")
    return records, directory


@pytest.fixture(scope="module")
def runs(spark, search_input):
    _, directory = search_input
    out = {}
    for how, output_time in KINDS:
        root = directory / f"{how}-{output_time}"
        pipeline = app.search_pipeline(spark, directory / "in", how, output_time)
        out[(how, output_time)] = (pipeline.run_to_completion(str(root / "ckpt"), str(root), timeout_s=600), root)
    return out


def delayed_clicks(records) -> set[str]:
    """The clicks the simulator held back behind the out-of-orderness bound (the only rows that can be late)."""
    clicks = records["clicks"]
    return set(clicks["url"][clicks["arrival"] - clicks["ts"] > CONFIG.max_delay_ms])


@pytest.mark.parametrize(("how", "output_time"), KINDS)
def test_every_pair_of_on_time_rows_is_joined_once(spark, search_input, runs, how, output_time):
    records, _ = search_input
    _, root = runs[(how, output_time)]
    late = read_output(spark, root / "clicked" / "late")
    assert len(late) and set(late["side"]) == {"RIGHT"}
    urls = {json.loads(r)["url"] for r in late["record"]}
    assert urls <= delayed_clicks(records), "only the clicks held back are late"
    assert (late["watermark"] >= late["event_time"]).all() and (late["lateness"] >= 0).all()
    dead = read_output(spark, root / "clicked" / "dead_letter")
    bad = records["queries"].iloc[BAD_QUERY]
    assert dead[["user", "reason"]].values.tolist() == [[bad["user"], "missing timestamp"]]
    assert json.loads(dead["record"].iat[0])["query"] == bad["query"]
    joined = read_output(spark, root / "clicked" / "panes")
    pairs = joined[joined["right_url"].notna()]
    expected = app.straight_pairs(records, urls)
    assert Counter(zip(pairs["left_query"], pairs["right_url"], strict=True)) == Counter(
        zip(expected["query"], expected["url"], strict=True)
    ), "every pair of on-time rows, once"
    timed = pairs["right_ts"] if output_time == "RIGHT" else pairs["left_ts"]
    assert (pairs["join_time"] == timed).all()
    unmatched = joined[joined["right_url"].isna()]
    if how == "inner":
        assert unmatched.empty
    else:
        alone = set(records["queries"]["query"].drop(BAD_QUERY)) - set(expected["query"])
        assert Counter(unmatched["left_query"]) == Counter(alone), "every query without a partner, once, with nulls"
        assert (unmatched["join_time"] == unmatched["left_ts"]).all()


@pytest.mark.parametrize(("how", "output_time"), KINDS)
def test_windows_over_the_joined_rows_take_every_row_on_time(spark, runs, how, output_time):
    """The join holds its output watermark for the rows it still owes, so the window stage reading it finds none
    late: each joined row counts once, in the window of its join time."""
    _, root = runs[(how, output_time)]
    joined = read_output(spark, root / "clicked" / "panes")
    assert read_output(spark, root / "click_through" / "late").empty
    panes = read_output(spark, root / "click_through" / "panes")
    assert set(panes["timing"]) == {"ON_TIME"}
    expected = Counter(joined["join_time"] // app.WINDOW_MS * app.WINDOW_MS)
    assert dict(zip(panes["window_start"], panes["rows"], strict=True)) == expected
    clicked = Counter(joined["join_time"][joined["right_url"].notna()] // app.WINDOW_MS * app.WINDOW_MS)
    assert dict(zip(panes["window_start"], panes["clicks"], strict=True)) == clicked


@pytest.mark.parametrize(("how", "output_time"), KINDS)
def test_spark_join_equals_the_core_reference(spark, search_input, runs, how, output_time):
    """The same batches through the core's MicroBatchPipeline, with the source watermarks the Spark run's driver
    computed: the joined rows, late rows and window panes of every batch are the same."""
    records, _ = search_input
    query, root = runs[(how, output_time)]
    reference = MicroBatchPipeline(dict.fromkeys(app.SOURCES, "ts"), app.search_stages(how, output_time))
    controller = query.controller
    expected: dict[str, list] = {
        "joined": [],
        "late": [],
        "click_through": [],
        "abandoned": [],
        "per_window": [],
        "same_window": [],
    }
    for report in query.reports:
        b = report.batch_id
        inputs = {n: f[f["batch"] == b][list(app.COLUMNS[n])] for n, f in records.items()}
        emitted = reference.run_batch(inputs, report.processing_time)
        clicked = emitted["clicked"]
        rows = reference.rows_of("clicked", clicked)
        expected["joined"] += [
            (b, r.get("left_query"), r.get("right_url"), r["join_time"]) for r in rows.to_dict("records")
        ]
        expected["late"] += [(b, r.side.value, r.key, r.timestamp, r.watermark) for r in clicked.late]  # type: ignore[union-attr]
        expected["click_through"] += [
            (b, p.window.start, p.timing.value, p.value["rows"], p.value["clicks"])
            for p in emitted["click_through"].all_panes()
        ]  # type: ignore[union-attr]
        abandoned = reference.stages["abandoned"].rows(emitted["abandoned"].rows)  # type: ignore[union-attr]
        expected["abandoned"] += [
            (b, r["user"], r["queries"], r["last_ms"], r["output_time"]) for r in abandoned.to_dict("records")
        ]
        expected["per_window"] += [
            (b, p.window.start, p.timing.value, p.value["searches"], p.value["queries"])
            for p in emitted["abandoned_per_window"].all_panes()  # type: ignore[union-attr]
        ]
        same = reference.stages["same_window"].rows(emitted["same_window"].joined)  # type: ignore[union-attr]
        expected["same_window"] += [
            (b, r["left_query"], r["right_url"], r["window_start"], r["timing"], r["pane_index"])
            for r in same.to_dict("records")
        ]
        sources, _ = controller._graph(controller.entry_for_batch(b + 1))
        ended = controller.entry_for_batch(b + 1).end_of_input
        reference.end_batch({n: (MAX_TIMESTAMP, False) if ended else (s.watermark, s.idle) for n, s in sources.items()})
        assert reference.graph.input_watermarks() == controller.entry_for_batch(b + 1).stage_watermarks, b
    joined = read_output(spark, root / "clicked" / "panes")
    late = read_output(spark, root / "clicked" / "late")
    delays = read_output(spark, root / "click_through" / "panes")
    abandoned = read_output(spark, root / "abandoned" / "panes")
    per_window = read_output(spark, root / "abandoned_per_window" / "panes")
    same = read_output(spark, root / "same_window" / "panes")

    def nulls(value):
        return None if pd.isna(value) else value

    got = {
        "joined": [(r.batch_id, nulls(r.left_query), nulls(r.right_url), r.join_time) for r in joined.itertuples()],
        "late": [(r.batch_id, r.side, r.user, r.event_time, r.watermark) for r in late.itertuples()],
        "click_through": [(r.batch_id, r.window_start, r.timing, r.rows, r.clicks) for r in delays.itertuples()],
        "abandoned": [(r.batch_id, r.user, r.queries, r.last_ms, r.output_time) for r in abandoned.itertuples()],
        "per_window": [(r.batch_id, r.window_start, r.timing, r.searches, r.queries) for r in per_window.itertuples()],
        "same_window": [
            (r.batch_id, r.left_query, r.right_url, r.window_start, r.timing, r.pane_index) for r in same.itertuples()
        ],
    }
    for kind in expected:
        assert sorted(got[kind], key=str) == sorted(expected[kind], key=str), kind


def test_timers_find_every_abandoned_search_once_and_windows_take_them_on_time(spark, search_input, runs):
    """Event-time timers (a user's last query + 20 s, timed at the last query) find each user's searches as the
    straight computation does; the timers' holds keep the window stage reading them from seeing any late."""
    records, _ = search_input
    _, root = runs[("inner", "RIGHT")]
    got = read_output(spark, root / "abandoned" / "panes")
    assert (got["output_time"] == got["last_ms"]).all()
    expected = app.straight_searches(records["queries"])
    columns = ["user", "queries", "first_ms", "last_ms"]
    assert sorted(map(tuple, got[columns].values.tolist())) == sorted(map(tuple, expected[columns].values.tolist()))
    dead = read_output(spark, root / "abandoned" / "dead_letter")
    assert dead["reason"].tolist() == ["missing timestamp"], "the query without an event time, and nothing else"
    assert read_output(spark, root / "abandoned_per_window" / "late").empty
    per_window = read_output(spark, root / "abandoned_per_window" / "panes")
    assert set(per_window["timing"]) == {"ON_TIME"}
    windows_of = Counter(got["last_ms"] // app.WINDOW_MS * app.WINDOW_MS)
    assert dict(zip(per_window["window_start"], per_window["searches"], strict=True)) == windows_of


def test_the_window_join_pairs_each_query_with_its_windows_clicks_once(spark, search_input, runs):
    """Flink's window join with allowed lateness: every pair of a query and a click of one user and 30-second
    window, once, but for rows late for their window (in the late output, with their side); the late clicks within
    30 s are paired in LATE panes; each pair is timed at its window's max timestamp."""
    records, _ = search_input
    _, root = runs[("inner", "RIGHT")]
    got = read_output(spark, root / "same_window" / "panes")
    late = read_output(spark, root / "same_window" / "late")
    missed = {json.loads(r).get("url") or json.loads(r).get("query") for r in late["record"]} if len(late) else set()
    expected = app.straight_window_pairs(records, missed)
    pairs = Counter(zip(got["left_query"], got["right_url"], got["window_start"], strict=True))
    assert pairs == Counter(zip(expected["query"], expected["url"], expected["window_start"], strict=True))
    assert (got["join_time"] == got["window_end"] - 1).all()
    assert "LATE" in set(got["timing"]), "a click 25 s late joins in a LATE pane"
    assert read_output(spark, root / "same_window" / "dead_letter")["reason"].tolist() == ["missing timestamp"]


def test_reports_reconcile_the_join_and_show_the_quiet_split_idle(runs):
    query, root = runs[("inner", "RIGHT")]
    clicked = query.stage_reconciliation("clicked")
    rows_in = sum(len(f) for f in searches.generate(CONFIG).values())
    assert (clicked.input_rows, clicked.records, clicked.dead_letters) == (rows_in, rows_in - 1, 1), clicked.describe()
    assert clicked.window_pairs == clicked.records and clicked.late > 0, clicked.describe()
    delays = query.stage_reconciliation("click_through")
    assert delays.input_rows == clicked.panes == delays.in_windows, delays.describe()
    quiet = f"clicks/{CONFIG.quiet_split}"
    idle = [r for r in query.reports if r.splits[quiet][1] and r.watermark < MAX_TIMESTAMP]
    assert idle, "the quiet clicks split went idle before the end of the input"
    assert max(r.stages["clicked"].open_windows for r in query.reports) > 0, "buffered rows show as open windows"
    with pytest.raises(ValueError, match="'clicked' has no windows to explain"):
        query.explain("u1", Window(0, 1_000), "clicked")
    with pytest.raises(ValueError, match="'abandoned' has no windows to explain"):
        query.explain("u1", Window(0, 1_000), "abandoned")
    # What waits at an event time: after the end of input every row left the join and every timer fired.
    row = query.explain_time(1_000, "clicked", "left")
    assert row.status is TimeStatus.DONE and "left the buffer" in row.reason, row.text()
    assert query.explain_time(1_000, "abandoned").status is TimeStatus.DONE
    with pytest.raises(ValueError, match="say which side"):
        query.explain_time(1_000, "clicked")
    # A window join's pairs wait in windows: explained as windows.
    assert query.explain("u1", Window(0, 30_000), "same_window").max_timestamp == 29_999
    abandoned = query.stage_reconciliation("abandoned")
    queries = len(searches.generate(CONFIG)["queries"])
    assert (abandoned.input_rows, abandoned.records, abandoned.in_windows) == (queries, queries - 1, queries - 1)
    assert max(r.stages["abandoned"].open_windows for r in query.reports) > 0, "keys with state show as open windows"
    # The checkpoint's definition names the join: floodmark explain reads it and explains the window stage.
    explained = CliRunner().invoke(
        app_cli, ["explain", str(root / "ckpt"), "--stage", "click_through", "--window-start", "0"]
    )
    assert explained.exit_code == 0, explained.output
    refused = CliRunner().invoke(app_cli, ["explain", str(root / "ckpt"), "--stage", "clicked", "--window-start", "0"])
    assert refused.exit_code == 2 and "is an interval join and has no windows" in refused.output
    assert "--time" in refused.output
    row = ["explain", str(root / "ckpt"), "--stage", "clicked", "--time", "1000", "--side", "right"]
    explained = CliRunner().invoke(app_cli, row)
    assert explained.exit_code == 0 and "a right row (from 'clicks')" in explained.output, explained.output


def stage_rows(spark, root: Path) -> dict[str, list]:
    """Every stage's main output without batch ids (a restart may cut batches differently), sorted."""
    out = {}
    for stage in ("clicked", "click_through", "abandoned", "abandoned_per_window", "same_window"):
        rows = read_output(spark, root / stage / "panes")
        out[stage] = sorted(map(tuple, rows.drop(columns=["batch_id"]).astype(str).values.tolist()))
    late = read_output(spark, root / "clicked" / "late")
    out["late"] = sorted(map(tuple, late.drop(columns=["batch_id"]).astype(str).values.tolist()))
    return out


def test_kill_minus_nine_during_a_join_loses_and_repeats_nothing(spark, search_input, runs):
    """The driver is killed with -9 mid-stream and started again: the joined rows, late rows and windows equal the
    uninterrupted run's (the left join: its buffered queries, matched or not, live in the checkpoint)."""
    _, directory = search_input
    crash = directory / "crash"
    args = (directory / "in", crash / "ckpt", crash / "out", "left", "LEFT")
    killed_after = kill_after(crash / "ckpt", 6, *args, script=JOIN_DRIVER)
    query, reference = runs[("left", "LEFT")]
    assert killed_after < len(query.reports), "killed in the middle of the run"
    second = run_driver(*args, script=JOIN_DRIVER)
    assert second.wait(timeout=600) == 0
    assert stage_rows(spark, crash / "out") == stage_rows(spark, reference)


def test_floodmark_demo_searches(tmp_path):
    """The demo: the left join timed at the query and the timers, each checked against the straight computation."""
    result = CliRunner().invoke(app_cli, ["demo", "searches", "--output", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "demo" / "summary.txt").read_text()
    assert "equal to the straight computation without the late clicks" in summary
    assert "abandoned searches (equal to the straight computation)" in summary
    again = CliRunner().invoke(app_cli, ["demo", "searches", "--output", str(tmp_path)])
    assert again.exit_code == 2 and "is not an earlier searches demo" in again.output


def test_advise_join_counts_the_pairs_the_join_made_on_spark(spark, search_input, runs):
    """``floodmark advise --join`` over the demo's files; the advisor's pair count at the join's own bounds is the
    number of pairs the inner join made on Spark (its late clicks aside)."""
    records, directory = search_input
    inputs = directory / "in"
    said = CliRunner().invoke(
        app_cli, ["advise", str(inputs / "queries"), "--join", str(inputs / "clicks"), "--on", "user"]
    )
    assert said.exit_code == 0, said.output
    assert "left rows" in said.output and "coverage" in said.output
    _, root = runs[("inner", "RIGHT")]
    late = read_output(spark, root / "clicked" / "late")
    late_urls = {json.loads(r)["url"] for r in late["record"]}
    joined = read_output(spark, root / "clicked" / "panes")
    queries = records["queries"].dropna(subset=["ts"])
    clicks = records["clicks"][~records["clicks"]["url"].isin(late_urls)]
    left, right = (list(queries["user"]), queries["ts"].to_numpy()), (list(clicks["user"]), clicks["ts"].to_numpy())
    pairs = pairs_within(*left, *right, 0, app.CLICK_WITHIN_MS)
    assert pairs.sum() == len(joined) > 0


def test_explain_says_when_a_window_joins_pairs_come_and_lists_them(search_input, runs):
    """``floodmark explain <checkpoint> --stage same_window --key USER --window-start T``: a window join's window,
    explained as a window, with the pairs its panes emitted."""
    _, root = runs[("inner", "RIGHT")]
    got = read_folder(root / "same_window" / "panes")
    first = got.sort_values(["batch_id", "window_start"]).iloc[0]
    pairs = got[(got["user"] == first["user"]) & (got["window_start"] == first["window_start"])]
    said = CliRunner().invoke(
        app_cli,
        [
            "explain",
            str(root / "ckpt"),
            "--stage",
            "same_window",
            "--key",
            str(first["user"]),
            "--window-start",
            str(int(first["window_start"])),
        ],
    )
    assert said.exit_code == 0, said.output
    assert "panes in the output for this key and window:" in said.output
    for query, url in zip(pairs["left_query"], pairs["right_url"], strict=True):
        assert f"left_query={query}" in said.output and f"right_url={url}" in said.output
