"""``floodmark demo searches``: queries joined to the clicks that follow them, and timers, on local Spark.

1. The simulator (:mod:`floodmark.simulator.searches`) writes queries and clicks over three splits each (records up
   to 3 s out of order, a clicks split that goes quiet halfway, 3% of the clicks 25 s late) as one Parquet file per
   source and micro-batch.
2. The pipeline of :mod:`floodmark.apps.searches` runs on Spark: a left join of each query with its user's clicks up
   to 10 s later, timed at the query, then the click-through of each 30-second window; beside it, each user's
   abandoned searches found by event-time timers, counted per 30 seconds; and a window join of the queries and
   clicks of each 30-second window.
3. The summary checks the join against the pairs computed straight from the records (every pair of on-time rows
   once, the late clicks reported with their side), and the timers against the searches computed straight.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from rich.console import Console

from floodmark.apps.demo_output import prepare
from floodmark.apps.searches import search_pipeline, straight_pairs, straight_searches, write_input
from floodmark.simulator import searches

MARKER = "floodmark-searches-demo"
"""The file ``floodmark demo searches`` leaves in its output directory."""


def demo_config(seed: int = 1) -> searches.SearchConfig:
    """The demo's simulation: 2 minutes of queries from 20 users, 10-second batches."""
    return searches.SearchConfig(seed=seed)


def run_searches_demo(output: Path, config: searches.SearchConfig, console: Console) -> str:
    """Run the demo into ``output`` (replaced if it holds an earlier searches demo); returns the summary."""
    from floodmark.spark import local_session

    prepare(output, MARKER, "searches")
    records = searches.generate(config)
    batches = write_input(records, output / "input")
    console.print(
        f"[bold]searches[/]: {len(records['queries'])} queries and {len(records['clicks'])} clicks in {batches} "
        f"batches of {config.batch_ms // 1000} s; each query left-joined to its user's clicks up to 10 s later, "
        "click-through per 30 s; abandoned searches by event-time timers"
    )
    spark = local_session("floodmark-demo-searches", cores=2, shuffle_partitions=2)
    query = search_pipeline(spark, output / "input", how="left", output_time="LEFT").run_to_completion(
        str(output / "checkpoint"), str(output), timeout_s=900
    )

    def read(stage: str, kind: str) -> pd.DataFrame:
        path = output / stage / kind
        written = path.exists() and any(path.glob("batch_id=*"))
        return spark.read.parquet(str(path)).toPandas() if written else pd.DataFrame()

    joined, late = read("clicked", "panes"), read("clicked", "late")
    late_urls = {json.loads(r)["url"] for r in late["record"]} if len(late) else set()
    pairs = joined[joined["right_url"].notna()]
    expected = straight_pairs(records, late_urls)
    found = sorted(zip(pairs["left_query"], pairs["right_url"], strict=True))
    pairs_ok = found == sorted(zip(expected["query"], expected["url"], strict=True))
    abandoned = read("abandoned", "panes")
    columns = ["user", "queries", "first_ms", "last_ms"]
    searches_ok = sorted(map(tuple, abandoned[columns].values.tolist())) == sorted(
        map(tuple, straight_searches(records["queries"])[columns].values.tolist())
    )
    same = read("same_window", "panes")
    late_in_windows = int((same["timing"] == "LATE").sum()) if len(same) else 0
    click_through = read("click_through", "panes").sort_values("window_start")
    lines = [
        f"{len(query.reports)} batches; {query.reconciliation.describe()}",
        f"join: {len(pairs)} pairs ({'equal to' if pairs_ok else 'DIFFER FROM'} the straight computation without the "
        f"late clicks), {len(joined) - len(pairs)} queries without a click, {len(late)} late click(s) "
        f"(clicked/late, with their side and lateness)",
        f"timers: {len(abandoned)} abandoned searches ({'equal to' if searches_ok else 'DIFFER FROM'} the straight "
        "computation)",
        f"window join: {len(same)} (query, click) pairs of one user and 30-second window, {late_in_windows} of them "
        "in LATE panes (clicks late within the 30 s allowed lateness)",
        "click-through per 30 s, by the queries' time (window start: joined rows with a click / joined rows):",
    ]
    for row in click_through.itertuples():
        start = pd.Timestamp(int(row.window_start), unit="ms").strftime("%H:%M:%S")
        lines.append(f"  {start}  {int(row.clicks)} / {int(row.rows)}")
    lines.append(
        f"outputs under {output}/<stage>/ (panes, late, dead_letter); explain: floodmark explain "
        f"{output / 'checkpoint'} --stage click_through --window-start <ms>"
    )
    summary = "\n".join(lines)
    (output / "summary.txt").write_text(summary + "\n")
    return summary
