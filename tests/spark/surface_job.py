"""A user's pipeline read back only through what the docs tell a user to call, against a straight computation.

Ride-hailing events of three cities as JSON lines in ``city=X/`` folders, read with ``read_json_lines``:
``requests`` (a rider asks for a ride) and ``completions`` (the ride ends, with its fare). The pipeline:

* ``fares`` (a window stage, DISCARDING, the default): per city and minute the rides, fares' sum, mean, min and max;
  late completions within the allowed lateness make LATE panes, later ones go to the late output;
* ``asked`` (a window stage, ACCUMULATING): per city and minute the requests;
* ``completed`` (an interval join, left): each request with the completions of its ride 0 to 10 minutes later;
* ``same_window`` (a window join): a request and its ride's completion in the same 5 minutes;
* ``tally`` (a process function): per city, the requests it saw, emitted by an event-time timer at the end;
* ``busiest`` (a window stage reading ``asked``'s panes): per 5 minutes, the largest per-minute count.

The input has bad lines (broken JSON, a time that is not one, a fare that is text, a completion without its
fare), completions so late that they are dropped and late enough to make LATE panes, and a city that falls
silent for a while. :func:`good_rows` and :func:`window_totals` compute the figures straight from the lines with
pandas (``surface_checks.py`` the rest); what the engine reports as late (``read_late``) is taken out of the straight
computation, and the checks hold it to the rows written to be late.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark import cloudpickle

from floodmark import AccumulationMode, ProcessContext, Timer, WatermarkStrategy, WindowSpec, aggregates, windows

# The executors get the process function pickled by value (this module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MINUTE = 60_000
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
END_MS = T0_MS + 60 * MINUTE
"""The process stage's timer: after every request (fires with the end of input)."""
CITIES = ("a", "b", "c")
LATENESS = 5 * MINUTE
BOUND = 30_000
REQUEST_SCHEMA = "ts STRING, ride STRING, rider STRING"
COMPLETION_SCHEMA = "ts STRING, ride STRING, fare DOUBLE"


def iso(ms: int) -> str:
    return (T0 + timedelta(milliseconds=ms - T0_MS)).isoformat().replace("+00:00", "Z")


@dataclass
class Files:
    """The input, file by file, in the order they are written (and so read: one file per batch)."""

    files: list[tuple[Path, list[str]]] = field(default_factory=list)
    dead_letters: dict[str, list[str]] = field(default_factory=lambda: {"requests": [], "completions": []})
    """Each source's lines that are no record, as written."""
    without_fare: list[str] = field(default_factory=list)
    """Completions without a fare: records of the source that the window stage cannot use."""

    def add(self, root: Path, source: str, city: str, name: str, lines: list[str]) -> None:
        self.files.append((root / source / f"city={city}" / f"{name}.jsonl", lines))

    def write(self, start: int, stop: int | None = None, mtime: float = 1_700_000_000) -> None:
        for i, (path, lines) in enumerate(self.files[start:stop], start=start):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            os.utime(path, (mtime + 10 * i, mtime + 10 * i))

    def lines(self, source: str) -> list[tuple[str, str]]:
        """Every line of ``source`` with its city."""
        return [
            (path.parent.name.removeprefix("city="), line)
            for path, lines in self.files
            if path.parent.parent.name == source
            for line in lines
        ]


BAD_LINES = {
    "requests": ['{"ts": "yesterday", "ride": "x1", "rider": "r0"}', "{not json"],
    "completions": ['{"ts": "%s", "ride": "x2", "fare": "twelve"}', '{"ts": "%s", "ride": "x3"'],
}
"""Lines no stage can use: each a dead letter of the source (a time that is not one, broken or truncated JSON,
a fare that is text)."""


def input_files(root: Path, seed: int = 7) -> Files:
    """Requests and completions over 25 minutes, a file per city and 5 minutes; city c silent from minute 10 to
    19; bad lines; a last file of late completions of city a: at minute 2 (past the allowed lateness: the late
    output) and 2.5 minutes behind the slowest city's last completion (within it: LATE panes)."""
    rng = random.Random(seed)
    files = Files()
    ride = 0
    last_done = dict.fromkeys(CITIES, 0)
    for chunk in range(5):  # minutes [5 * chunk, 5 * chunk + 5)
        for city in CITIES:
            if city == "c" and chunk in (2, 3):
                continue  # city c says nothing from minute 10 to 19
            requests, completions = [], []
            for _ in range(12):
                ride += 1
                asked = T0_MS + chunk * 5 * MINUTE + rng.randrange(5 * MINUTE)
                rider = f"r{rng.randrange(6)}"
                requests.append(json.dumps({"ts": iso(asked), "ride": f"{city}{ride}", "rider": rider}))
                if rng.random() < 0.8:  # some rides never complete
                    done = asked + rng.randrange(1_000, 9 * MINUTE)
                    last_done[city] = max(last_done[city], done)
                    fare = round(rng.uniform(5, 40), 2)
                    if rng.random() < 0.05:  # a completion without its fare: the window stage cannot use it
                        completions.append(json.dumps({"ts": iso(done), "ride": f"{city}{ride}"}))
                        files.without_fare.append(completions[-1])
                    else:
                        completions.append(json.dumps({"ts": iso(done), "ride": f"{city}{ride}", "fare": fare}))
            if chunk == 1 and city == "b":
                when = iso(T0_MS + 6 * MINUTE)
                files.dead_letters["requests"] += BAD_LINES["requests"]
                files.dead_letters["completions"] += [line % when for line in BAD_LINES["completions"]]
                requests += BAD_LINES["requests"]
                completions += files.dead_letters["completions"]
            files.add(root, "requests", city, f"part-{chunk}", requests)
            files.add(root, "completions", city, f"part-{chunk}", completions)
    late = [
        json.dumps({"ts": iso(T0_MS + 2 * MINUTE + 5_000 * i), "ride": f"late{i}", "fare": 10.0 + i}) for i in range(3)
    ]
    # Behind the watermark (at least a minute behind the slowest city's last completion) but within the lateness.
    lag = min(last_done.values()) - 2 * MINUTE - BOUND
    late += [json.dumps({"ts": iso(lag + 5_000 * i), "ride": f"lag{i}", "fare": 20.0 + i}) for i in range(4)]
    files.add(root, "completions", "a", "part-late", late)
    return files


class Tally:
    """Per key, the rows it saw; one row at ``END_MS`` (an event-time timer: the end of input fires it)."""

    def process(self, record: dict, ctx: ProcessContext) -> None:
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.set_event_timer(END_MS)

    def on_timer(self, timer: Timer, ctx: ProcessContext) -> None:
        ctx.emit({"requests": ctx.state["n"]})


def pipeline(spark, root: Path, fares_window: str = "1 minute"):
    """The pipeline over ``root``'s ``requests/`` and ``completions/`` folders (one file per batch)."""
    from floodmark.spark import Pipeline, SourceTime, read_json_lines

    time = SourceTime(WatermarkStrategy.for_bounded_out_of_orderness(BOUND), split="city", known_splits=list(CITIES))
    job = Pipeline()
    options = {"maxFilesPerTrigger": "1"}
    job.source(
        "requests", read_json_lines(spark, str(root / "requests"), REQUEST_SCHEMA, options), event_time="ts", time=time
    )
    job.source(
        "completions",
        read_json_lines(spark, str(root / "completions"), COMPLETION_SCHEMA, options),
        event_time="ts",
        time=time,
    )
    job.stage(
        "fares",
        upstream="completions",
        key_by="city",
        spec=WindowSpec(
            windows.Tumbling(fares_window),
            {
                "rides": aggregates.count(),
                "total": aggregates.sum("fare"),
                "mean_fare": aggregates.mean("fare"),
                "low": aggregates.min("fare"),
                "high": aggregates.max("fare"),
            },
            allowed_lateness=LATENESS,
        ),
    )
    job.stage(
        "asked",
        upstream="requests",
        key_by="city",
        spec=WindowSpec(
            windows.Tumbling("1 minute"),
            {"requests": aggregates.count()},
            allowed_lateness=LATENESS,
            accumulation=AccumulationMode.ACCUMULATING,
        ),
    )
    job.stage(
        "busiest",
        upstream="asked",
        spec=WindowSpec(windows.Tumbling("5 minutes"), {"most": aggregates.max("requests")}),
    )
    job.join("completed", left="requests", right="completions", on="ride", between=(0, "10 minutes"), how="left")
    job.window_join(
        "same_window",
        "requests",
        "completions",
        on="ride",
        window=windows.Tumbling("5 minutes"),
        allowed_lateness=BOUND,
    )
    job.process("tally", upstream="requests", function=Tally(), key_by="city", output={"requests": "long"})
    return job


FIRST_RUN = 14
"""Files written before the first run (the rest come while it is stopped)."""


@dataclass
class Run:
    """A run of the pipeline: its folder (``in/``, ``ckpt/``, ``out/``), its input and the last run's handle."""

    root: Path
    files: Files
    query: Any
    """The handle of the run that went to the end (``FloodmarkQuery``): its reconciliation covers both runs."""

    @property
    def out(self) -> Path:
        return self.root / "out"


def caught_up(query, timeout_s: float = 300) -> None:
    """``query.processAllAvailable()``, which returns once nothing can fire without input (a query that kept asking
    for batches without input never returned: the test fails at ``timeout_s`` instead of hanging)."""
    done, failed = threading.Event(), []

    def wait() -> None:
        try:
            query.processAllAvailable()
        except BaseException as error:  # the query's own failure, raised in the test below
            failed.append(error)
        finally:
            done.set()

    threading.Thread(target=wait, daemon=True).start()
    assert done.wait(timeout_s), f"processAllAvailable did not return in {timeout_s} s: batches without input"
    if failed:
        raise failed[0]


def run(spark, root: Path) -> Run:
    """The pipeline run as a user runs it, on a classic session or over Spark Connect (``root`` absolute): started,
    caught up, stopped; more files; started again on the same checkpoint to the end of its input."""
    files = input_files(root / "in")
    files.write(0, FIRST_RUN)
    checkpoint, out = str(root / "ckpt"), str(root / "out")
    first = pipeline(spark, root / "in").start(checkpoint, out, trigger_interval="1 second")
    try:
        caught_up(first)
    finally:
        first.stop()
    files.write(FIRST_RUN)
    query = pipeline(spark, root / "in").run_to_completion(checkpoint, out, timeout_s=600)
    return Run(root, files, query)


def good_rows(files: Files, source: str) -> pd.DataFrame:
    """``source``'s lines that are records (the straight computation's own parse): city, ms and the fields."""
    rows = []
    for city, line in files.lines(source):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        try:
            ms = int(datetime.fromisoformat(data["ts"].replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            continue
        if "fare" in data and not isinstance(data["fare"], int | float):
            continue
        rows.append({"city": city, "ms": ms, **{k: v for k, v in data.items() if k != "ts"}})
    return pd.DataFrame(rows)


def window_totals(rows: pd.DataFrame) -> pd.DataFrame:
    """Per city and minute: rides, fares' total, mean, min and max (rows with a fare only)."""
    rows = rows.dropna(subset=["fare"]).assign(window_start=lambda f: f["ms"] - (f["ms"] % MINUTE))
    grouped = rows.groupby(["city", "window_start"])["fare"]
    return pd.DataFrame(
        {
            "rides": grouped.size(),
            "total": grouped.sum(),
            "mean_fare": grouped.mean(),
            "low": grouped.min(),
            "high": grouped.max(),
        }
    ).reset_index()
