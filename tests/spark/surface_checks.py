"""The checks of a :func:`surface_job.run`: what a user reads back of it, only through what the docs tell a user to
call (``read_panes``, ``read_late``, ``read_dead_letters``, the reconciliation), against pandas over the same lines.

Each check takes the session the run was made with, classic or Spark Connect, and the run: ``test_surface.py``
calls them on the suite's classic session, ``test_connect.py`` in a Connect client (``connect_driver.py surface``)
on its remote session, so each rule is written once. A check raises AssertionError when a figure differs.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
import surface_job as job
from surface_job import MINUTE, Run

from floodmark.spark import read_dead_letters, read_late, read_panes


def pandas_of(frame) -> pd.DataFrame:
    return frame.toPandas()


def late_rides(spark, run: Run, stage: str, schema: str) -> set[str]:
    try:
        late = pandas_of(read_late(spark, str(run.out / stage), schema))
    except FileNotFoundError:
        return set()
    return {fields["ride"] for fields in late["record_fields"]}


def window_results(spark, run: Run) -> None:
    """The window stages' results are the straight computation's: DISCARDING panes combined, ACCUMULATING panes'
    latest, and a stage over another's panes."""
    files, out = run.files, run.out
    late = late_rides(spark, run, "fares", job.COMPLETION_SCHEMA)
    assert late == {"late0", "late1", "late2"}, "past the allowed lateness: the late output, nothing else"
    every_pane = pandas_of(read_panes(spark, str(out / "fares"), latest=False))
    windows_fired_twice = every_pane.groupby(["city", "window_start"]).size().gt(1).sum()
    assert windows_fired_twice, "some windows took late records within the lateness: LATE panes to combine"
    assert set(every_pane.loc[every_pane["timing"] == "LATE", "city"]) >= {"a"}

    panes = pandas_of(read_panes(spark, str(out / "fares")))
    good = job.good_rows(files, "completions")
    expected = job.window_totals(good[~good["ride"].isin(late)])
    merged = expected.merge(panes, on=["city", "window_start"], how="outer", suffixes=("_expected", ""))
    assert len(merged) == len(expected) == len(panes), "one row per window, no window missing or extra"
    for column in ("rides", "total", "mean_fare", "low", "high"):
        assert merged[column].to_numpy() == pytest.approx(merged[f"{column}_expected"].to_numpy()), column

    asked = pandas_of(read_panes(spark, str(out / "asked")))  # ACCUMULATING: the latest pane is the result
    requests = job.good_rows(files, "requests").assign(window_start=lambda f: f["ms"] - f["ms"] % MINUTE)
    straight = requests.groupby(["city", "window_start"]).size().rename("expected").reset_index()
    both = straight.merge(asked, on=["city", "window_start"], how="outer")
    assert (both["requests"] == both["expected"]).all()

    busiest = pandas_of(read_panes(spark, str(out / "busiest")))  # a stage over the panes of another
    five = straight.assign(window_start=lambda f: f["window_start"] - f["window_start"] % (5 * MINUTE))
    most = five.groupby("window_start")["expected"].max().rename("expected").reset_index()
    both = most.merge(busiest, on="window_start", how="outer")
    assert (both["most"] == both["expected"]).all()


def join_and_process(spark, run: Run) -> None:
    """Both joins' rows and the process function's timer rows are the straight computation's."""
    files, out = run.files, run.out
    late = pandas_of(read_late(spark, str(out / "completed"), job.COMPLETION_SCHEMA))
    late_sides = {(row["side"], json.loads(row["record"])["ride"]) for _, row in late.iterrows()}
    assert ("RIGHT", "late0") in late_sides
    requests = job.good_rows(files, "requests")
    completions = job.good_rows(files, "completions")
    requests = requests[~requests["ride"].map(lambda r: ("LEFT", r) in late_sides)]
    completions = completions[~completions["ride"].map(lambda r: ("RIGHT", r) in late_sides)]
    pairs = requests.merge(completions, on="ride", how="left", suffixes=("_l", "_r"))
    gap = pairs["ms_r"] - pairs["ms_l"]
    matched = pairs[(gap >= 0) & (gap <= 10 * MINUTE)]
    unmatched = requests[~requests["ride"].isin(matched["ride"])]
    expected = sorted([(r, True) for r in matched["ride"]] + [(r, False) for r in unmatched["ride"]])

    rows = pandas_of(read_panes(spark, str(out / "completed")))  # a join's rows are each a result
    got = sorted(zip(rows["ride"], rows["right_ts"].notna(), strict=True))
    assert got == expected

    # The window join: each pair of the same ride within one 5-minute window, once; rows past it reported late.
    late = pandas_of(read_late(spark, str(out / "same_window"), job.COMPLETION_SCHEMA))
    late_sides = {(row["side"], json.loads(row["record"])["ride"]) for _, row in late.iterrows()}
    requests, completions = job.good_rows(files, "requests"), job.good_rows(files, "completions")
    requests = requests[~requests["ride"].map(lambda r: ("LEFT", r) in late_sides)]
    completions = completions[~completions["ride"].map(lambda r: ("RIGHT", r) in late_sides)]
    pairs = requests.merge(completions, on="ride", suffixes=("_l", "_r"))
    five = 5 * MINUTE
    pairs = pairs[pairs["ms_l"] // five == pairs["ms_r"] // five]
    expected = sorted(zip(pairs["ride"], pairs["ms_l"] - pairs["ms_l"] % five, strict=True))
    rows = pandas_of(read_panes(spark, str(out / "same_window")))
    got = sorted(zip(rows["ride"], rows["window_start"], strict=True))
    assert got == expected and len(got) > 0

    tally = pandas_of(read_panes(spark, str(out / "tally")))
    assert (
        dict(zip(tally["city"], tally["requests"], strict=True))
        == job.good_rows(files, "requests").groupby("city").size().to_dict()
    )


def lines_and_dead_letters(spark, run: Run) -> None:
    """Every line is counted once (the reconciliation of both runs) and every dead letter keeps its text."""
    files, query = run.files, run.query
    lines = {source: files.lines(source) for source in ("requests", "completions")}
    run_totals = query.reconciliation  # the whole checkpoint: the first run and this one
    assert run_totals.rows_in == sum(len(each) for each in lines.values()), run_totals.describe()
    assert run_totals.dead_letters == sum(len(each) for each in files.dead_letters.values()), run_totals.describe()
    assert run_totals.stage_dead_letters == len(files.without_fare) > 0, run_totals.describe()
    said = f"{len(files.without_fare)} more dead letters of stages that could not use records"
    assert said in run_totals.describe()
    fares = query.stage_reconciliation("fares")
    assert fares.input_rows == len(lines["completions"])
    assert fares.dead_letters == len(files.dead_letters["completions"]) + len(files.without_fare)

    texts = pandas_of(read_dead_letters(spark, str(run.out / "fares")))["record"]
    assert sorted(texts) == sorted(files.dead_letters["completions"] + files.without_fare), "each line as it came"
    for stage in ("asked", "tally", "completed", "same_window"):  # every stage reading a source has its dead letters
        texts = pandas_of(read_dead_letters(spark, str(run.out / stage)))["record"]
        both = stage in ("completed", "same_window")
        expected = files.dead_letters["requests"] + (files.dead_letters["completions"] if both else [])
        assert sorted(texts) == sorted(expected), stage


def changed_definition_refused(spark, run: Run) -> None:
    """A changed window on the run's checkpoint is refused by name, before any query starts."""
    changed = job.pipeline(spark, run.root / "in", fares_window="2 minutes")
    with pytest.raises(ValueError, match=r"stage 'fares': window .*60000.* -> .*120000"):
        changed.start(str(run.root / "ckpt"), str(run.out))
    assert not spark.streams.active


CHECKS: dict[str, Callable[[Any, Run], None]] = {
    check.__name__: check
    for check in (window_results, join_and_process, lines_and_dead_letters, changed_definition_refused)
}
"""Every check, by name."""


def outcomes(spark, run: Run) -> dict[str, str]:
    """Each of :data:`CHECKS` run in turn: ``"ok"`` or the failure's traceback (every failure of one run)."""
    said = {}
    for name, check in CHECKS.items():
        try:
            check(spark, run)
        except Exception:
            said[name] = traceback.format_exc()
        else:
            said[name] = "ok"
    return said
