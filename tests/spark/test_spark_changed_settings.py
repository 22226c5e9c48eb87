"""Settings changed on a running job, on Spark: stop a query, change its settings, restart it on its checkpoint.

The first run reads four files, the second four more, both ways: a wider bound (1 s -> 5 s), idleness added, early
panes every 2 records instead of 3, allowed lateness raised from 0 to 20 s and the panes in another folder; then the
reverse (a narrower bound, idleness and early panes removed, lateness lowered to 0). The watermark of every batch is
held to a straight computation (each split's highest timestamp minus the bound of its run, never below what the
split had reached; MIN over the splits), and the panes and late records of both runs to the core's
``MicroBatchPipeline`` fed the same batches, whose stage takes the new settings at the restart's first batch: a run
that had the new settings from that batch on.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
from spark_helpers import read_output, recorded_hosts, stamp_in_order

from floodmark import WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.core.pipeline import MicroBatchPipeline, WindowedStage
from floodmark.spark import EventTimeAggregation, Pipeline, SourceTime

pytestmark = pytest.mark.spark

SPLITS = ("0", "1")
# (split, ts ms, key) per file; each file's highest timestamp is its own (it names the batch that read it).
FILES = [
    [(0, 1_000, "a"), (0, 2_000, "a"), (0, 3_000, "b"), (1, 1_500, "a")],
    [(0, 12_000, "a"), (0, 12_500, "a"), (1, 11_000, "b"), (1, 4_000, "a")],
    [(0, 25_000, "a"), (1, 21_000, "a"), (1, 22_000, "a")],
    [(0, 31_000, "b"), (1, 30_000, "b"), (1, 26_000, "a")],
    # After the restart: 9 000 and 15 000 are late under no allowed lateness, on time for 20 s of it.
    [(0, 33_000, "a"), (0, 9_000, "a"), (1, 32_000, "b")],
    [(0, 41_000, "a"), (1, 40_500, "a"), (1, 35_000, "b")],
    [(0, 52_000, "b"), (1, 51_000, "b"), (1, 15_000, "a")],
    [(0, 61_000, "a"), (1, 62_000, "a")],
]
FIRST_RUN = 4


@dataclass(frozen=True)
class Settings:
    """A run's settings: the bound (ms), idleness (ms or None), early panes every ``early`` records (None: none) and
    allowed lateness (ms)."""

    bound: int
    idleness: int | None
    early: int | None
    lateness: int


WIDER = Settings(1_000, None, 3, 0), Settings(5_000, 3_600_000, 2, 20_000)
"""A wider bound, idleness added, early panes more often, lateness raised."""
NARROWER = Settings(5_000, 3_600_000, 2, 20_000), Settings(1_000, None, None, 0)
"""A narrower bound, idleness and early panes removed, lateness lowered."""


def spec(settings: Settings) -> WindowSpec:
    early = None if settings.early is None else triggers.AfterCount(settings.early)
    trigger = triggers.AfterWatermark(early=early)
    aggregate = {"n": aggregates.count()}
    return WindowSpec(windows.Tumbling(10_000), aggregate, trigger=trigger, allowed_lateness=settings.lateness)


def pipeline(spark, folder, settings: Settings, host: str = "jvm") -> Pipeline:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(settings.bound)
    if settings.idleness is not None:
        strategy = strategy.with_idleness(settings.idleness)
    frame = spark.readStream.schema("p LONG, ts LONG, k STRING").option("maxFilesPerTrigger", 1).parquet(str(folder))
    job = Pipeline(host=host)  # type: ignore[arg-type]
    job.source("src", frame, "ts", SourceTime(strategy, split="p", periodic_interval=1, known_splits=SPLITS))
    job.stage("w", "src", spec(settings), key_by="k")
    return job


def write_files(folder, numbers) -> None:
    folder.mkdir(exist_ok=True)
    paths = []
    for i in numbers:
        paths.append(folder / f"part-{i:05d}.parquet")
        pd.DataFrame(FILES[i], columns=["p", "ts", "k"]).to_parquet(paths[-1], index=False)
    stamp_in_order(sorted(folder.glob("*.parquet")))


def expected_watermark(read: list[int], runs: tuple[Settings, Settings]) -> int:
    """The source's watermark after the files ``read`` (in order): a straight computation of the documented rule."""
    marks = dict.fromkeys(SPLITS, -(2**63))
    highest: dict[str, int] = {}
    for number in read:
        bound = runs[number >= FIRST_RUN].bound
        for split, ts, _ in FILES[number]:
            highest[str(split)] = max(highest.get(str(split), ts), ts)
        for split, top in highest.items():
            marks[split] = max(marks[split], top - bound - 1)
    return min(marks.values())


@pytest.mark.parametrize(("runs", "host"), [(WIDER, "jvm"), (WIDER, "python"), (NARROWER, "jvm"), (NARROWER, "python")])
def test_a_restart_keeps_the_state_through_changed_settings_as_if_they_held_from_that_batch(
    spark, tmp_path, runs, host
):
    folder, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    outputs = {"w": str(tmp_path / "first")}, {"w": str(tmp_path / "second")}
    write_files(folder, range(FIRST_RUN))
    query = pipeline(spark, folder, runs[0], host).start(checkpoint, outputs[0], trigger_interval="0 seconds")
    query.processAllAvailable()
    query.stop()
    reports = list(query.reports)

    assert recorded_hosts(tmp_path / "checkpoint") == {"w": host}
    changed = pipeline(spark, folder, runs[1], host)
    found = {(c.owner, c.setting): c.kept for c in changed.changes(checkpoint, outputs[1])}
    assert found == {
        ("source 'src'", "watermarks"): True,
        ("stage 'w'", "allowed_lateness"): True,
        ("stage 'w'", "trigger"): True,
        ("stage 'w'", "outputs"): True,
    }
    write_files(folder, range(FIRST_RUN, len(FILES)))
    query = changed.start(checkpoint, outputs[1], trigger_interval="0 seconds")
    query.processAllAvailable()
    query.stop()
    restarted_at = min(r.batch_id for r in query.reports if r.batch_id > reports[-1].batch_id)
    reports += [r for r in query.reports if r.batch_id >= restarted_at]

    by_highest = {max(ts for _, ts, _ in rows): i for i, rows in enumerate(FILES)}
    read: list[int] = []
    reference = MicroBatchPipeline({"src": "ts"}, [WindowedStage("w", ("src",), spec(runs[0]), ("k",))])
    expected, late = [], []
    for report in reports:
        assert report.watermark == expected_watermark(read, runs), (report.batch_id, read)
        number = by_highest[report.max_event_time] if report.records else None
        if number == FIRST_RUN:  # the restart's first batch: the stage runs with the new settings from here on
            reference.stages["w"] = WindowedStage("w", ("src",), spec(runs[1]), ("k",))
        rows = pd.DataFrame(FILES[number] if number is not None else [], columns=["p", "ts", "k"])
        emitted = reference.run_batch({"src": rows}, report.processing_time)["w"]
        panes = emitted.all_panes()
        expected += [(report.batch_id, p.key, p.window.start, p.timing.value, p.value["n"]) for p in panes]
        late += [(r.key, r.timestamp) for r in emitted.late]
        if number is not None:
            read.append(number)
        reference.end_batch({"src": (expected_watermark(read, runs), False)})
    assert read == list(range(len(FILES)))

    got = []
    for root in outputs:
        panes = read_output(spark, tmp_path / root["w"].rsplit("/", 1)[-1] / "panes")
        got += list(zip(panes["batch_id"], panes["k"], panes["window_start"], panes["timing"], panes["n"], strict=True))
    assert sorted(got) == sorted(expected)
    late_output = read_output(spark, tmp_path / "second" / "late")
    assert sorted(zip(late_output.get("k", []), late_output.get("event_time", []), strict=True)) == sorted(late)
    lates = {(k, start) for _, k, start, timing, _ in got if timing == "LATE"}
    if runs is WIDER:
        # The records the old lateness would have refused make LATE panes: the windows [0, 10 s) and [10 s, 20 s).
        assert lates == {("a", 0), ("a", 10_000)} and not late
        assert {timing for *_, timing, _ in got} == {"EARLY", "ON_TIME", "LATE"}
    else:
        # The new lateness refuses them: the late output has them, and no early pane comes after the restart.
        assert not lates and sorted(late) == [("a", 9_000), ("a", 15_000)]
        assert not [b for b, *_, timing, _ in got if timing == "EARLY" and b >= restarted_at]


def test_a_refused_change_stops_the_start_naming_it(spark, tmp_path):
    folder, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    write_files(folder, range(1))
    query = pipeline(spark, folder, WIDER[0]).start(checkpoint, str(tmp_path / "out"), trigger_interval="0 seconds")
    query.processAllAvailable()
    query.stop()
    frame = spark.readStream.schema("p LONG, ts LONG, k STRING").parquet(str(folder))
    ascending = SourceTime(WatermarkStrategy.for_monotonous_timestamps())
    single = EventTimeAggregation(frame, "ts", ["k"], spec(WIDER[0]), ascending)
    said = {(c.owner, c.setting, c.kept) for c in single.changes(checkpoint, str(tmp_path / "out"))}
    assert ("source 'src'", "source removed", False) in said, "another job's checkpoint: its source and stage differ"
    job = pipeline(spark, folder, WIDER[0])
    job.stages["w"] = WindowedStage("w", ("src",), spec(WIDER[0]), ("k", "p"))
    with pytest.raises(ValueError, match=r"stage 'w': key_by \['k'\] -> \['k', 'p'\]: refused"):
        job.start(checkpoint, str(tmp_path / "out"))
