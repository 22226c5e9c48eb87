"""Pipeline config validation, text-line output and the live view's rendering (no Spark)."""

from __future__ import annotations

import pandas as pd
import pytest
from controller_rows import gauge_rows
from pydantic import ValidationError
from rich.console import Console

from floodmark.apps.config import PipelineConfig
from floodmark.apps.live import Totals, render
from floodmark.apps.outputs import read_output, text_lines
from floodmark.core import windows
from floodmark.core.clock import ManualClock
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, format_timestamp, parse_duration
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_STAGE, Controller, SourceSettings
from floodmark.driver.reports import BatchReport


def test_durations_take_units_and_refuse_nonsense():
    assert [parse_duration(v) for v in (250, "250ms", "50s", "1m", "2h", "1d")] == [
        250,
        250,
        50_000,
        60_000,
        7_200_000,
        86_400_000,
    ]
    for bad in ("fast", "-5s", -1, "1.5s", True):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.parametrize("text", ["30", " 30 ", "interval 30", "1 minute 30"])
def test_a_number_without_a_unit_is_refused_in_text(text):
    """An int is ms; text without a unit could be seconds or ms: refused, naming the forms that are taken."""
    with pytest.raises(ValueError, match="without a unit") as refused:
        parse_duration(text)
    for form in ("'30 seconds'", "'30s'", "'500 ms'", "an int of ms", "a timedelta"):
        assert form in str(refused.value)
    assert parse_duration(30) == 30
    with pytest.raises(ValidationError, match="without a unit"):
        PipelineConfig.model_validate({"key_by": ["k"], "window": {"size": "60000"}})


def test_a_far_future_dead_letter_says_its_times_in_iso_and_the_skew_as_a_duration():
    import numpy as np

    from floodmark.core.assign import validate_future_skew

    now, year = 1_767_254_400_000, 365 * 86_400_000  # 2026-01-01T08:00Z
    bad, reason = validate_future_skew(np.array([now, 4_102_444_800_000, 10**15]), now, year)
    assert bad.tolist() == [False, True, True]
    assert reason(1) == (
        "timestamp 4102444800000 (2100-01-01T00:00:00.000Z) is more than 365 d (31536000000 ms) ahead of "
        "processing time 1767254400000 (2026-01-01T08:00:00.000Z)"
    )
    assert reason(2).startswith("timestamp 1000000000000000 (after 9999-12-31T23:59:59.999Z) is more than 365 d")
    _, short = validate_future_skew(np.array([70_500]), 0, 250)
    assert short(0) == (
        "timestamp 70500 (1970-01-01T00:01:10.500Z) is more than 250 ms ahead of processing time 0 "
        "(1970-01-01T00:00:00.000Z)"
    )
    assert format_timestamp(151_851_341_158_908) == "6781-12-23T16:05:58.908Z", "exact to the ms (not via a float)"
    assert format_timestamp(np.int64(1_767_225_953_570)) == "2026-01-01T00:05:53.570Z", "numpy's ints (panes' times)"


def test_pipeline_config_from_toml(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        'key_by = ["channel", "behavior"]\nsplit = "split"\nwindow = {kind = "tumbling", size = "1m"}\n'
        'out_of_orderness = "50s"\nidleness = "5s"\naggregations = {count = "count", total = "sum:price"}\n'
    )
    config = PipelineConfig.from_file(path)
    assert config.window.assigner() == windows.Tumbling(60_000)
    assert (config.out_of_orderness, config.idleness, config.allowed_lateness) == (50_000, 5_000, 0)
    assert set(config.aggregate_map()) == {"count", "total"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"key_by": [], "window": {"size": "1m"}}, "key_by"),
        ({"key_by": ["k"], "window": {"kind": "sliding", "size": "1m"}}, "needs slide"),
        ({"key_by": ["k"], "window": {"size": "1m"}, "aggregations": {"x": "median:v"}}, "unknown aggregate"),
        ({"key_by": ["k"], "window": {"size": "1m"}, "aggregations": {"x": "sum"}}, "needs a field"),
        ({"key_by": ["k"], "window": {"size": "1m"}, "out_of_orderness": "soon"}, "not a duration"),
        ({"key_by": ["k"], "window": {"size": "1m"}, "colour": "red"}, "Extra inputs"),
    ],
)
def test_pipeline_config_errors_name_the_problem(data, message):
    with pytest.raises(ValidationError, match=message):
        PipelineConfig.model_validate(data)


def test_text_lines_in_the_seed_format():
    panes = pd.DataFrame(
        {
            "window_start": [1_767_225_660_000, 1_767_225_600_000],
            "window_end": [1_767_225_720_000, 1_767_225_660_000],
            "channel": ["b", "a"],
            "behavior": ["CLICK", "OPEN"],
            "pane_index": [0, 0],
            "count": [3, 12],
        }
    )
    assert text_lines(panes, ["channel", "behavior"], ["count"]) == [
        "20260101000000 20260101000100 a OPEN 12",
        "20260101000100 20260101000200 b CLICK 3",
    ]


def test_read_output_collects_batches(tmp_path):
    for batch in (0, 3):
        directory = tmp_path / "panes" / f"batch_id={batch}"
        directory.mkdir(parents=True)
        pd.DataFrame({"count": [batch + 1]}).to_parquet(directory / "part-0.parquet")
    frame = read_output(tmp_path, "panes")
    assert sorted(zip(frame["batch_id"], frame["count"], strict=True)) == [(0, 1), (3, 4)]
    assert read_output(tmp_path, "late").empty
    with pytest.raises(ValueError, match="unknown output"):
        read_output(tmp_path, "bogus")


def rendered(report: BatchReport) -> str:
    """The live view's frame for ``report`` (the only report seen), as text."""
    totals = Totals()
    totals.add(report)
    console = Console(width=160, record=True)
    console.print(render(report, totals))
    return console.export_text()


def test_live_view_names_the_split_holding_the_watermark_back_and_the_idle_one():
    report = BatchReport(
        batch_id=7,
        watermark=1_000,
        next_watermark=50_000,
        processing_time=90_000,
        splits={"0": (80_000, False), "1": (50_000, False), "2": (MIN_TIMESTAMP, True)},
        records=30,
        panes=2,
        late=1,
        bad=0,
        oldest_pending=60_000,
        open_windows=4,
        split_records={"0": 20, "1": 10},
        max_event_time=130_000,
    )
    text = rendered(report)
    rows = [line.strip("│ ") for line in text.splitlines()]
    line_of = {row.split()[0]: row for row in rows if row[:1].isdigit()}
    assert "holding the watermark back" in line_of["1"]
    assert "IDLE" in line_of["2"]
    assert "event-time lag" in text and "80.0 s" in text  # event time seen but not yet final
    assert "processing-time lag" in text and "30.0 s" in text


def test_live_view_at_the_end_of_input_names_no_holder_and_no_distance_to_the_max_watermark():
    report = BatchReport(
        batch_id=9,
        watermark=50_000,
        next_watermark=MAX_TIMESTAMP,
        processing_time=95_000,
        splits={"0": (80_000, False), "1": (50_000, False)},
        records=0,
        panes=3,
        late=0,
        bad=0,
        oldest_pending=None,
        open_windows=0,
        split_records={},
        max_event_time=130_000,
    )
    text = rendered(report)
    assert "holding the watermark back" not in text
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if "│" in line]
    ahead = {row[0]: row[3] for row in cells if row[0].isdigit()}
    assert ahead == {"0": "-", "1": "-"}
    assert "MAX (end)" in text


def stage_rows(reports: list[BatchReport]) -> tuple[str, dict[str, list[str]]]:
    """The live view's frame after ``reports`` (as text) and its stage table's cells by stage name."""
    totals = Totals()
    for report in reports:
        totals.add(report)
    console = Console(width=200, record=True)
    console.print(render(reports[-1], totals))
    text = console.export_text()
    lines = [line.replace("┃", "│") for line in text.splitlines()]  # the header's rule is ┃
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    return text, {row[0]: row[1:] for row in cells if len(row) == 9}


def test_live_view_of_a_pipeline_has_a_row_per_stage_with_its_running_totals(tmp_path):
    """Stage a (reading the source) feeds stage b: each row has the stage's watermarks, lags and totals."""
    clock = ManualClock(100_000)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(1_000)
    ctl = Controller(ControlLog(tmp_path), {"src": SourceSettings(strategy)}, {"a": ["src"], "b": ["a"]}, clock=clock)
    ctl.ensure_initial_entry()
    batches = [
        ([(5, 10_000, 30_000)], {"a": gauge_rows(0, 100_000, 2)}, {"a": {"PANE": 1, "LATE": 2}}),
        (
            [(2, 70_000, 80_000)],
            {"a": gauge_rows(60_000, 101_000, 1), "b": gauge_rows(0, 101_000, 1)},
            {"a": {"PANE": 2, "LATE": 1}, "b": {"BAD": 1}},
        ),
        ([], {"b": gauge_rows(None, None, 0)}, {"b": {"PANE": 1}}),
    ]
    reports = []
    for batch_id, (stats, gauges, counts) in enumerate(batches):
        clock.advance_to(100_000 + (batch_id + 1) * 1_000)
        rows = [{"fm_split": "0", "fm_count": c, "fm_min_ts": lo, "fm_max_ts": hi} for c, lo, hi in stats]
        reports.append(ctl.on_batch(batch_id, rows, gauges, counts))
    text, rows = stage_rows(reports)
    assert list(rows) == ["stage", "a", "b"]  # the header, then upstream first
    assert rows["stage"][:4] == ["input watermark", "output watermark", "event-time lag", "processing-time lag"]
    # The last batch ran at 102 s: a holds its output one below the 60 s pane it still owes b (42 s behind), and
    # its oldest pending record came at 101 s; b has a's 28.999 s and nothing pending.
    assert rows["a"] == [
        "1970-01-01T00:01:18.999Z",
        "1970-01-01T00:00:59.999Z",
        "42.0 s",
        "1.0 s",
        "1",
        "3",
        "3",
        "0",
    ]
    assert rows["b"] == [
        "1970-01-01T00:00:28.999Z",
        "1970-01-01T00:00:28.999Z",
        "73.0 s",
        "0.0 s",
        "0",
        "1",
        "0",
        "1",
    ]
    assert "late records" in text and "panes" in text, "the query's summary is still there"


def test_live_view_of_a_single_aggregation_has_no_stage_table(tmp_path):
    clock = ManualClock(100_000)
    ctl = Controller.of_aggregation(
        ControlLog(tmp_path), SourceSettings(WatermarkStrategy.for_bounded_out_of_orderness(1_000)), clock=clock
    )
    ctl.ensure_initial_entry()
    clock.advance_to(101_000)
    stats = [{"fm_split": "0", "fm_count": 5, "fm_min_ts": 10_000, "fm_max_ts": 30_000}]
    report = ctl.on_batch(0, stats, {AGGREGATION_STAGE: gauge_rows(0, 100_000, 2)}, {AGGREGATION_STAGE: {"PANE": 1}})
    text, rows = stage_rows([report])
    assert len(report.stages) == 1 and not rows
    assert "output watermark" not in text and "combined watermark" in text


def test_live_view_says_which_split_is_behind_and_which_is_idle_because_caught_up():
    report = BatchReport(
        batch_id=3,
        watermark=1_000,
        next_watermark=50_000,
        processing_time=90_000,
        splits={"0": (80_000, False), "1": (50_000, False), "2": (10_000, True), "3": (9_000, True)},
        records=30,
        split_records={"0": 20, "1": 10},
        split_backlog={"0": 0, "1": 1_200, "2": 0},
    )
    rows = [line.strip("│ ") for line in rendered(report).splitlines()]
    line_of = {row.split()[0]: row for row in rows if row[:1].isdigit()}
    assert "holding the watermark back, behind (1,200 unread)" in line_of["1"]
    assert "active" in line_of["0"]
    assert "idle (caught up)" in line_of["2"]
    assert "IDLE (ignored)" in line_of["3"], "its source did not say: idle by the timeout alone"
