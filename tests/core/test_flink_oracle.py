"""floodmark against real Apache Flink (PyFlink 2.3.0 from PyPI) on the same input: cumulate windows (Flink SQL's
``CUMULATE``), the interval join (Flink's ``IntervalJoinOperator``), the window join (``DataStream.join().window()``)
and event-time timers. Test-only and slow (a Flink job per case):
``bash scripts/flink-oracle.sh && FLOODMARK_FLINK_ORACLE=1 .venv/bin/python -m pytest tests/core/test_flink_oracle.py``.

The oracle (``devtools/flink_oracle/oracle.py``) runs Flink with one source in arrival order and a watermark after
every row (SQL: the highest event time so far; the join: each event's ``watermark_after``), so Flink's late rows
are decided as floodmark's are here: a row, then the watermark it moves.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from floodmark import aggregates, windows
from floodmark.core.join import IntervalJoinOperator, IntervalJoinSpec, Side, WindowJoinOperator, WindowJoinSpec
from floodmark.core.keyed_operator import KeyedRows
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.testing import WindowHarness

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "devtools" / "flink_oracle" / "oracle.py"
FLINK_PYTHON = ROOT / "build" / "flink-oracle" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    os.environ.get("FLOODMARK_FLINK_ORACLE") != "1",
    reason="the Flink oracle: bash scripts/flink-oracle.sh, then FLOODMARK_FLINK_ORACLE=1",
)


def flink(command: str, payload: dict, tmp_path: Path, *options: str):
    if not FLINK_PYTHON.exists():
        pytest.fail(f"{FLINK_PYTHON} is missing: run bash scripts/flink-oracle.sh first")
    source = tmp_path / f"{command}.json"
    source.write_text(json.dumps(payload))
    env = dict(os.environ, FLINK_ORACLE_BUILD=str(ROOT / "build" / "flink-oracle-jars"))
    done = subprocess.run(
        [str(FLINK_PYTHON), str(ORACLE), command, str(source), *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_cumulate_windows_equal_flink_sqls_on_out_of_order_rows(tmp_path):
    rng = random.Random(27)
    rows, latest = [], 0
    for _ in range(80):
        latest += rng.randint(0, 30)
        ts = max(0, latest - rng.choice([0, 0, 0, 40, 120]))  # some rows behind the watermark
        rows.append({"k": rng.choice("abc"), "ts": 10_000 + ts, "v": float(rng.randint(1, 9))})
    expected = flink("cumulate", {"step_ms": 100, "max_size_ms": 400, "rows": rows}, tmp_path)

    for policy in ("general", "columnar"):
        h = WindowHarness(
            window=windows.Cumulate(100, 400),
            aggregate=aggregates.several(n=aggregates.count(), total=aggregates.sum("v")),
            policy=policy,
        )
        watermark = 0
        for row in rows:  # Flink SQL: the row, then the watermark at the highest event time so far
            h.add_elements([(row, row["ts"])], key=row["k"])
            watermark = max(watermark, row["ts"])
            h.advance_watermark_to(watermark)
        h.advance_watermark_to_infinity()
        got = sorted(
            (p.key, p.window.start, p.window.end, p.value["n"], p.value["total"]) for p in h.panes if p.value["n"]
        )
        flinks = sorted((r["k"], r["window_start_ms"], r["window_end_ms"], r["n"], r["total"]) for r in expected)
        assert got == flinks, policy
        assert h.late, "some rows were late for some of their windows: the case is not trivial"


def floodmark_join(lower: int, upper: int, events: list[dict]) -> dict:
    operator = IntervalJoinOperator(IntervalJoinSpec(between=(lower, upper)))
    pairs, late = [], {"L": [], "R": []}
    for event in events:
        side = Side.LEFT if event["side"] == "L" else Side.RIGHT
        out = operator.add(KeyedRows([event["k"]], [event["ts"]], [event["id"]], side))
        pairs += [[p.left, p.right] for p in out.joined]
        for row in out.late:
            late[event["side"]].append(row.value)
        if event["watermark_after"] is not None:
            operator.advance_watermark(event["watermark_after"])
    return {"pairs": sorted(pairs), "late_left": sorted(late["L"]), "late_right": sorted(late["R"])}


def flinks_join(payload: dict, tmp_path: Path) -> dict:
    result = flink("interval-join", payload, tmp_path, "--pause-ms", "100")
    return {k: sorted(result[k]) for k in ("pairs", "late_left", "late_right")}


def test_the_interval_join_equals_flinks_where_no_row_sits_on_the_watermark(tmp_path):
    """Event times even, watermarks odd: Flink's lateness (``ts < W``) and floodmark's (``ts <= W``) agree, and so
    do the cleanups; both sides' late rows included."""
    rng = random.Random(42)
    events, watermark = [], 1
    for i in range(40):
        ts = 2 * rng.randint(0, 60)
        moved = None
        if rng.random() < 0.3:
            watermark += 2 * rng.randint(0, 8)
            moved = watermark
        events.append(
            {"side": rng.choice("LR"), "k": rng.choice("ab"), "ts": ts, "id": f"e{i}", "watermark_after": moved}
        )
    payload = {"lower_ms": -10, "upper_ms": 6, "events": events}
    ours = floodmark_join(-10, 6, events)
    assert ours["pairs"] and (ours["late_left"] or ours["late_right"]), "pairs and late rows both occur"
    assert flinks_join(payload, tmp_path) == ours


def test_flink_loses_the_on_time_pair_at_the_watermark_and_floodmark_reports_the_late_row(tmp_path):
    """Bounds [-5, 0]: left@100, the watermark moves to 99 or 100, right@100. At 99 both join the pair; at 100
    Flink cleans left@100 up (its timer at 100) yet calls right@100 on time (100 < 100 is false): no pair, no late
    row. floodmark calls right@100 late and says so."""
    for watermark in (99, 100):
        events = [
            {"side": "L", "k": "a", "ts": 100, "id": "l1", "watermark_after": None},
            {"side": "L", "k": "b", "ts": 100, "id": "lb", "watermark_after": watermark},
            {"side": "R", "k": "a", "ts": 100, "id": "r1", "watermark_after": None},
        ]
        flinks = flinks_join({"lower_ms": -5, "upper_ms": 0, "events": events}, tmp_path)
        ours = floodmark_join(-5, 0, events)
        if watermark == 99:
            assert flinks == ours == {"pairs": [["l1", "r1"]], "late_left": [], "late_right": []}
        else:
            assert flinks == {"pairs": [], "late_left": [], "late_right": []}, "Flink 2.3.0 loses the pair silently"
            assert ours == {"pairs": [], "late_left": [], "late_right": ["r1"]}


def test_event_time_timers_fire_as_flinks_on_the_same_watermarks(tmp_path):
    """``floodmark.apps.searches.AbandonedSearches`` (event-time timers at the last event + a gap, deleted and set
    again per event) against the same rule as a Java ``KeyedProcessFunction`` in Flink, on one stream of out-of-order
    events with a watermark after some of them, a few events behind it: the same rows, each emitted at the same
    watermark (Flink fires a timer at ``watermark >= time``, and one a record sets behind the watermark at the
    watermark's next move, as floodmark does)."""
    from floodmark.apps.searches import QUIET_MS, AbandonedSearches
    from floodmark.core.process import KeyedProcessOperator
    from floodmark.core.time import MAX_TIMESTAMP

    rng = random.Random(28)
    events, latest = [], 0
    for i in range(150):
        latest += rng.choice([500, 2_000, 7_000, 15_000, 26_000])
        ts = latest - rng.choice([0, 0, 0, 1_000, 30_000])  # out of order, some behind the watermark
        watermark = latest - 2_000 if rng.random() < 0.4 else None
        events.append({"k": rng.choice("abc"), "ts": ts, "id": str(i), "watermark_after": watermark})
    expected = flink("timers", {"gap_ms": QUIET_MS, "events": events}, tmp_path)

    operator = KeyedProcessOperator(AbandonedSearches())
    got = {}
    for e in events:
        at = operator.watermark
        for out in operator.add(KeyedRows([e["k"]], [e["ts"]], [{"ts": e["ts"]}])).rows:
            got[(out.key, out.row["queries"], out.row["first_ms"], out.row["last_ms"])] = at
        if e["watermark_after"] is not None:
            for out in operator.advance_watermark(e["watermark_after"]).rows:
                got[(out.key, out.row["queries"], out.row["first_ms"], out.row["last_ms"])] = operator.watermark
    for out in operator.advance_watermark(MAX_TIMESTAMP).rows:  # the end of Flink's bounded input
        got[(out.key, out.row["queries"], out.row["first_ms"], out.row["last_ms"])] = MAX_TIMESTAMP
    flinks = {tuple(row[:4]): row[4] for row in expected}
    assert len(flinks) == len(expected) > 20 and len(set(flinks.values())) > 10
    assert got == flinks, sorted((row, got[row], flinks[row]) for row in got if got[row] != flinks[row])


def floodmark_window_join(window, lateness: int, events: list[dict]) -> dict:
    operator = WindowJoinOperator(WindowJoinSpec(window, lateness))
    pairs, late = [], []
    for event in events:
        side = Side.LEFT if event["side"] == "L" else Side.RIGHT
        out = operator.add(KeyedRows([event["k"]], [event["ts"]], [event["id"]], side))
        if event["watermark_after"] is not None:
            out.extend(operator.advance_watermark(event["watermark_after"]))
        pairs += [[p.left, p.right] for p in out.joined]
        late += [row.value for row in out.late]
    end = operator.advance_watermark(MAX_TIMESTAMP)
    pairs += [[p.left, p.right] for p in end.joined]
    return {"pairs": sorted(pairs), "late": sorted(set(late))}


def window_join_events(seed: int, behind: int) -> list[dict]:
    """Rows of two keys on both sides, some up to ``behind`` ms behind the watermark; event times even, watermarks
    odd (no row on the watermark: there Flink and floodmark agree on lateness anyway, a window's, not a row's)."""
    rng = random.Random(seed)
    events, latest, watermark = [], 0, -1
    for i in range(60):
        latest += 2 * rng.randint(0, 3)
        ts = max(0, latest - 2 * rng.randint(0, behind // 2)) if rng.random() < 0.2 else latest
        moved = None
        if rng.random() < 0.4 and latest - 3 > watermark:
            watermark = latest - 3
            moved = watermark
        side, key = rng.choice("LR"), rng.choice("ab")
        events.append({"side": side, "k": key, "ts": ts, "id": f"e{i}", "watermark_after": moved})
    return events


@pytest.mark.parametrize(
    ("kind", "window", "size", "slide"),
    [
        ("tumbling", windows.Tumbling(10), 10, 0),
        ("sliding", windows.Sliding(10, 5), 10, 5),
        ("sessions", windows.Sessions(5), 5, 0),
    ],
)
def test_the_window_join_equals_flinks_without_allowed_lateness(tmp_path, kind, window, size, slide):
    """Tumbling, sliding and session windows: the same pairs as Flink's window join, each as often (once per window
    holding both rows); the rows of windows the watermark had passed join nothing on either (Flink drops them
    silently, floodmark reports them late)."""
    events = window_join_events(7, behind=20)
    ours = floodmark_window_join(window, 0, events)
    payload = {"kind": kind, "size_ms": size, "slide_ms": slide, "lateness_ms": 0, "events": events}
    flinks = sorted(flink("window-join", payload, tmp_path, "--pause-ms", "100")["pairs"])
    assert ours["pairs"] and ours["late"], "pairs and late rows both occur"
    assert flinks == ours["pairs"]


def test_flinks_window_join_repeats_a_windows_pairs_at_each_late_firing_and_floodmark_emits_each_once(tmp_path):
    """With allowed lateness, a late row fires its window again: Flink's join (a CoGroup over the window) emits every
    pair of the window again, floodmark only the pairs that are new. The distinct pairs are the same."""
    events = window_join_events(11, behind=20)
    ours = floodmark_window_join(windows.Tumbling(10), 14, events)
    payload = {"kind": "tumbling", "size_ms": 10, "lateness_ms": 14, "events": events}
    flinks = flink("window-join", payload, tmp_path, "--pause-ms", "100")["pairs"]
    assert sorted({tuple(p) for p in flinks}) == sorted({tuple(p) for p in ours["pairs"]})
    assert len(ours["pairs"]) == len({tuple(p) for p in ours["pairs"]}), "floodmark: each pair once"
    assert len(flinks) > len(ours["pairs"]), "Flink repeated pairs at the late firings"
