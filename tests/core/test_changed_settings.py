"""Settings changed on a running job: which changes keep the state, and how the watermarks follow.

A source's coordinator restored from a snapshot taken under another strategy applies the new settings to what each
split has seen; the split's watermark never goes back. The reference is a coordinator that had the new strategy from
the start and saw the same batches: after the restore, each split's watermark is the larger of the two runs' (the new
bound applied to the same highest timestamps, never below what the split had already emitted).
"""

from __future__ import annotations

import json
import logging

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from floodmark import AccumulationMode, WindowSpec, aggregates, triggers, windows
from floodmark.core.pipeline import WindowedStage
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks import SourceWatermarks, SplitBatchStats, WatermarkStrategy
from floodmark.core.watermarks.bounded import BoundedOutOfOrderness
from floodmark.driver.controller import SourceSettings
from floodmark.driver.definition import JobDefinition, SourceDefinition
from floodmark.driver.definition_changes import check, compare

BOUNDED = {
    "bounded 0": WatermarkStrategy.for_bounded_out_of_orderness(0),
    "bounded 1s": WatermarkStrategy.for_bounded_out_of_orderness(1_000),
    "bounded 20s": WatermarkStrategy.for_bounded_out_of_orderness(20_000),
    "ascending": WatermarkStrategy.for_monotonous_timestamps(),
    "legacy 5s": WatermarkStrategy.for_legacy_bounded_out_of_orderness(5_000),
}

batches = st.lists(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 100_000)), max_size=4), min_size=1, max_size=8
)


def run(source: SourceWatermarks, batches: list[list[tuple[str, int]]], start: int) -> list[int]:
    marks = []
    for i, batch in enumerate(batches):
        stats = {}
        for split, ts in batch:
            low, high = stats.get(split, (ts, ts))
            stats[split] = (min(low, ts), max(high, ts))
        source.on_batch([SplitBatchStats(s, 1, low, high) for s, (low, high) in stats.items()])
        marks.append(source.advance_processing_time(start + (i + 1) * 1_000))
    return marks


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(BOUNDED)), st.sampled_from(sorted(BOUNDED)), batches, batches, st.booleans(), st.booleans()
)
def test_a_bound_changed_on_restore_applies_to_what_each_split_has_seen(old, new, before, after, idle_old, idle_new):
    """Every pair of bounded-family strategies, idleness added, kept or removed (a timeout longer than the run)."""
    old_strategy, new_strategy = BOUNDED[old], BOUNDED[new]
    if idle_old:
        old_strategy = old_strategy.with_idleness(3_600_000)
    if idle_new:
        new_strategy = new_strategy.with_idleness(3_600_000)
    running = SourceWatermarks(old_strategy, splits=("a", "b"))
    run(running, before, 0)
    stopped_at = running.split_watermarks()
    restored = SourceWatermarks(new_strategy, splits=("a", "b"), start_processing_time=len(before) * 1_000)
    restored.restore(running.snapshot())
    reference = SourceWatermarks(new_strategy, splits=("a", "b"))
    run(reference, before, 0)
    for i, batch in enumerate(after):
        run(restored, [batch], (len(before) + i) * 1_000)
        run(reference, [batch], (len(before) + i) * 1_000)
        theirs = reference.split_watermarks()
        expected = {s: max(stopped_at[s][0], theirs[s][0]) for s in ("a", "b")}
        assert {s: mark for s, (mark, _) in restored.split_watermarks().items()} == expected
        assert restored.watermark == max(min(expected.values()), min(m for m, _ in stopped_at.values()))


def test_a_wider_bound_holds_the_watermark_until_records_pass_it():
    running = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1_000), splits=("a",))
    running.on_batch([SplitBatchStats("a", 1, 50_000, 50_000)])
    assert running.advance_processing_time(1_000) == 48_999
    wider = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(10_000), splits=("a",))
    wider.restore(running.snapshot())
    assert wider.advance_processing_time(2_000) == 48_999  # not 39_999: a watermark never goes back
    wider.on_batch([SplitBatchStats("a", 1, 60_000, 60_000)])
    assert wider.advance_processing_time(3_000) == 49_999  # the new bound from the highest timestamp on


def test_idleness_added_to_a_running_job_counts_from_the_restart():
    running = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(0), splits=("a", "b"))
    running.on_batch([SplitBatchStats("a", 1, 10_000, 10_000), SplitBatchStats("b", 1, 5_000, 5_000)])
    assert running.advance_processing_time(1_000) == 4_999
    idle = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(5_000)
    restored = SourceWatermarks(idle, splits=("a", "b"), start_processing_time=1_000)
    restored.restore(running.snapshot())
    restored.on_batch([SplitBatchStats("a", 1, 20_000, 20_000), SplitBatchStats("b", 0)])
    assert restored.advance_processing_time(2_000) == 4_999  # b holds it back: not idle yet
    restored.on_batch([SplitBatchStats("a", 1, 21_000, 21_000), SplitBatchStats("b", 0)])
    assert restored.advance_processing_time(9_000) == 20_999  # b idle 5 s after its timer started


def test_a_strategy_of_another_kind_continues_from_the_highest_timestamp():
    running = SourceWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1_000), splits=("a",))
    running.on_batch([SplitBatchStats("a", 1, 30_000, 30_000)])
    running.advance_processing_time(1_000)
    advancing = WatermarkStrategy.for_idle_advancing(bound=500, wait=2_000, interval=200)
    restored = SourceWatermarks(advancing, periodic_interval=200, splits=("a",), start_processing_time=1_000)
    restored.restore(running.snapshot())
    assert restored.advance_processing_time(1_200) == 29_499  # 30_000 - 500 - 1: the new bound at once
    # Silence: the idle-advancing rule moves event time on from the highest timestamp (after its wait).
    assert restored.advance_processing_time(5_000) > 30_000


@pytest.mark.parametrize("bound", [0, 1_000])
def test_snapshots_written_with_the_bound_inside_are_still_read(bound):
    """A checkpoint's generator snapshot from before settings were kept out holds every attribute."""
    fresh = BoundedOutOfOrderness(2_000)
    fresh.restore({"bound": bound, "max_timestamp": MIN_TIMESTAMP + bound + 1})
    assert fresh.view().highest_timestamp is None
    fresh.restore({"bound": bound, "max_timestamp": 7_000})
    assert fresh.snapshot() == {"max_timestamp": 7_000} and fresh.bound == 2_000


# ------------------------------------------------------------------ which changes keep the state
def job(
    bound=0,
    idleness=None,
    size=60_000,
    key=("k",),
    lateness=0,
    trigger=None,
    aggregate=None,
    accumulation=AccumulationMode.DISCARDING,
    more=False,
    panes="/out/w",
    time_zone="UTC",
):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(bound)
    if idleness is not None:
        strategy = strategy.with_idleness(idleness)
    source = {"src": SourceDefinition(SourceSettings(strategy), {"column": "ts"}, time_zone=time_zone)}
    spec = WindowSpec(
        windows.Tumbling(size),
        aggregate or {"n": aggregates.count()},
        trigger=trigger or triggers.Default(),
        allowed_lateness=lateness,
        accumulation=accumulation,
    )
    stages = {"w": WindowedStage("w", ("src",), spec, key)}
    if more:
        stages["x"] = WindowedStage("x", ("w",), WindowSpec(windows.Tumbling(size), {"n": aggregates.count()}))
    return JobDefinition(source, stages, {"w": {"panes": panes}}).to_dict()


def verdicts(earlier, now):
    return {(c.owner, c.setting): c.kept for c in compare(earlier, now)}


def test_watermark_settings_lateness_triggers_and_outputs_keep_the_state():
    early = triggers.AfterWatermark(early=triggers.AfterCount(10))
    late = triggers.AfterWatermark(early=triggers.AfterCount(3), late=triggers.AfterCount(1))
    changed = job(bound=5_000, idleness=30_000, lateness=60_000, trigger=late, panes="/elsewhere/w")
    assert verdicts(job(trigger=early), changed) == {
        ("source 'src'", "watermarks"): True,
        ("stage 'w'", "allowed_lateness"): True,
        ("stage 'w'", "trigger"): True,
        ("stage 'w'", "outputs"): True,
    }
    assert compare(job(), job()) == []


def test_what_the_state_cannot_follow_is_refused_by_name():
    changed = job(
        size=120_000,
        key=("k", "j"),
        aggregate={"n": aggregates.sum("v")},
        accumulation=AccumulationMode.ACCUMULATING,
        time_zone="Europe/Berlin",
    )
    assert verdicts(job(), changed) == {
        ("source 'src'", "time_zone"): False,
        ("stage 'w'", "window"): False,
        ("stage 'w'", "key_by"): False,
        ("stage 'w'", "aggregate"): False,
        ("stage 'w'", "accumulation"): False,
    }
    assert verdicts(job(more=True), job()) == {("stage 'x'", "stage removed"): False}
    assert verdicts(job(), job(more=True)) == {("stage 'x'", "stage added"): False}


def test_early_firings_added_or_removed_keep_the_state():
    """A count stage's partial aggregates wait apart for the watermark without early firings: they are merged into
    their windows when early firings are added (the operators' restore, ``test_jvm_window_operator.py``)."""
    early = triggers.AfterWatermark(early=triggers.AfterCount(2))
    assert [(c.setting, c.kept) for c in compare(job(), job(trigger=early))] == [("trigger", True)]
    assert [(c.setting, c.kept) for c in compare(job(trigger=early), job())] == [("trigger", True)]


def test_a_trigger_with_state_of_its_own_is_refused():
    after = triggers.OrFinally(triggers.Repeatedly(triggers.AfterCount(2)), triggers.AfterWatermark())
    found = compare(job(), job(trigger=after))
    assert [(c.setting, c.kept) for c in found] == [("trigger", False)]
    assert "columnar form" in found[0].line()


def test_refused_changes_stop_the_start_and_kept_ones_are_logged(tmp_path, caplog):
    from floodmark.driver.checkpoint_files import LocalFiles

    files, checkpoint = LocalFiles(), str(tmp_path)
    JobDefinition.from_dict(job()).write(files, checkpoint)
    with caplog.at_level(logging.INFO, logger="floodmark.driver.definition_changes"):
        kept = check(files, checkpoint, JobDefinition.from_dict(job(bound=5_000, lateness=1_000)))
    assert [c.setting for c in kept] == ["watermarks", "allowed_lateness"]
    assert "stage 'w': allowed_lateness 0 -> 1000: kept" in caplog.text
    with pytest.raises(ValueError, match=r"stage 'w': window .*size': 60000.* -> .*120000.*: refused") as error:
        check(files, checkpoint, JobDefinition.from_dict(job(size=120_000, lateness=5)))
    assert "allowed_lateness" not in str(error.value)  # only what is refused
    assert "start the changed query from a new checkpoint" in str(error.value)


def test_explain_changes_from_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from floodmark.apps.cli import app
    from floodmark.driver.checkpoint_files import LocalFiles

    checkpoint = tmp_path / "checkpoint"
    JobDefinition.from_dict(job()).write(LocalFiles(), str(checkpoint))
    edited = json.loads((checkpoint / "floodmark" / "definition.json").read_text())
    edited["stages"]["w"]["spec"]["allowed_lateness"] = "1 minute"
    (tmp_path / "job.json").write_text(json.dumps(edited))
    said = CliRunner().invoke(app, ["explain", str(checkpoint), "--changes", str(tmp_path / "job.json")])
    assert said.exit_code == 0, said.output
    assert "stage 'w': allowed_lateness 0 -> '1 minute': kept" in said.output
    edited["stages"]["w"]["key_by"] = ["k", "j"]
    (tmp_path / "job.json").write_text(json.dumps(edited))
    said = CliRunner().invoke(app, ["explain", str(checkpoint), "--changes", str(tmp_path / "job.json")])
    assert said.exit_code == 1
    assert "stage 'w': key_by ['k'] -> ['k', 'j']: refused" in said.output
