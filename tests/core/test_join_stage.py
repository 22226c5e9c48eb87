"""A join stage in the engine-free graph of stages (``MicroBatchPipeline``): queries joined to the clicks that
follow them, then 1-second windows over the joined rows timed at the click or the query (seed 003's example of
output times)."""

from __future__ import annotations

from collections import Counter

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import aggregates, windows
from floodmark.core.join import IntervalJoinSpec
from floodmark.core.pipeline import JOIN_TIME, JoinStage, MicroBatchPipeline, WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP

WITHIN = 10_000
"""A click joins the queries of its user up to 10 s before it."""


def pipeline(how: str = "inner", output_time: str = "RIGHT") -> MicroBatchPipeline:
    join = JoinStage(
        "clicked",
        left="queries",
        right="clicks",
        on=("user",),
        spec=IntervalJoinSpec(between=(0, WITHIN), how=how, output_time=output_time),
    )
    per_second = WindowedStage(
        "per_second", ("clicked",), WindowSpec(windows.Tumbling(1_000), {"n": aggregates.count()}), key_by=("user",)
    )
    return MicroBatchPipeline({"queries": "ts", "clicks": "ts"}, [join, per_second])


def test_joined_rows_carry_both_sides_and_the_clicks_time():
    p = pipeline()
    queries = pd.DataFrame({"user": ["u", "u"], "ts": [1_000, 50_000], "q": ["shoes", "socks"]})
    clicks = pd.DataFrame({"user": ["u", "u"], "ts": [4_000, 70_000], "url": ["a", "b"]})
    out = p.run_batch({"queries": queries, "clicks": clicks}, 0)
    rows = p.stages["clicked"].rows(out["clicked"].joined)
    assert rows.to_dict("records") == [
        {"user": "u", "left_ts": 1_000, "left_q": "shoes", "right_ts": 4_000, "right_url": "a", JOIN_TIME: 4_000}
    ], "70 s is 20 s after the 50 s query: no pair"


batches = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from("uv"), st.integers(0, 12_000)), max_size=4),
        st.lists(st.tuples(st.sampled_from("uv"), st.integers(0, 9_000)), max_size=4),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=100, deadline=None)
@given(batches, st.sampled_from(["LEFT", "RIGHT"]))
def test_every_pair_is_counted_once_in_the_window_of_its_time_and_none_is_late_downstream(script, output_time):
    """Each source is in order (its watermark follows it: bounded out-of-orderness 0), the two run at their own
    pace (batch b's queries and clicks lie in their own 12 s and 9 s strides), so the join's input watermark is the
    clicks' (the slower); the join holds its output watermark for the clicks still owed, so the window stage downstream
    takes every joined row on time and counts each pair once, in the second of its time: the click's, or the
    query's (a pair found when the click comes, timed at a query the watermark may have passed: the hold's case)."""
    p = pipeline(output_time=output_time)
    queries_all, clicks_all, late = [], [], []
    for b, (queries, clicks) in enumerate(script):
        q = sorted((u, b * 12_000 + t) for u, t in queries)
        c = sorted((u, b * 9_000 + t) for u, t in clicks)
        queries_all += q
        clicks_all += c
        frames = {
            "queries": pd.DataFrame({"user": [u for u, _ in q], "ts": pd.array([t for _, t in q], dtype="int64")}),
            "clicks": pd.DataFrame({"user": [u for u, _ in c], "ts": pd.array([t for _, t in c], dtype="int64")}),
        }
        for emitted in p.run_batch(frames, 0).values():
            late += emitted.late
        p.end_batch({"queries": (b * 12_000 + 11_999, False), "clicks": (b * 9_000 + 8_999, False)})
    for _ in range(3):  # the end of input reaches the stages level by level
        for emitted in p.run_batch({}, 0).values():
            late += emitted.late
        p.end_batch({"queries": (MAX_TIMESTAMP, False), "clicks": (MAX_TIMESTAMP, False)})

    pairs = [(u, tq, tc) for u, tq in queries_all for v, tc in clicks_all if u == v and tq <= tc <= tq + WITHIN]
    expected = Counter((u, (tc if output_time == "RIGHT" else tq) // 1_000 * 1_000) for u, tq, tc in pairs)
    panes = p.results["per_second"].emitted.all_panes()
    assert late == []
    assert Counter({(pane.key, pane.window.start): pane.value["n"] for pane in panes}) == expected
