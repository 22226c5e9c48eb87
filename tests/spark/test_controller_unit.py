"""The controller without Spark: end of input decided in the batch that read nothing (or, in a bounded run, as the
batch planned to read nothing begins), as a one-way latch."""

from __future__ import annotations

from floodmark import WatermarkStrategy
from floodmark.core.clock import ManualClock
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_STAGE, NO_ENGINE, Controller, EngineHooks, SourceSettings
from floodmark.protocol.wire import DEAD_LETTERS_SPLIT


def controller(tmp_path, engine=NO_ENGINE):
    source = SourceSettings(WatermarkStrategy.for_bounded_out_of_orderness(0))
    ctl = Controller.of_aggregation(ControlLog(tmp_path), source, clock=ManualClock(0), engine=engine)
    ctl.ensure_initial_entry()
    return ctl


def stats(count):
    return [{"fm_split": "0", "fm_count": count, "fm_min_ts": 10, "fm_max_ts": 20}] if count else []


def test_end_of_input_after_the_first_batch_without_records(tmp_path):
    ctl = controller(tmp_path)
    ctl.end_input_when(lambda: True)
    assert ctl.on_batch(0, stats(3), {}, {}).next_watermark < MAX_TIMESTAMP
    dead_letter = [{"fm_split": DEAD_LETTERS_SPLIT, "fm_count": 1, "fm_min_ts": 0, "fm_max_ts": 0}]
    assert ctl.on_batch(1, dead_letter, {}, {AGGREGATION_STAGE: {"BAD": 1}}).next_watermark < MAX_TIMESTAMP
    assert ctl.on_batch(2, [], {}, {}).next_watermark == MAX_TIMESTAMP
    assert ctl.on_batch(3, [], {}, {}).watermark == MAX_TIMESTAMP


def test_the_first_batch_after_a_restart_does_not_end_the_input(tmp_path):
    ctl = controller(tmp_path)
    ctl.on_batch(0, stats(3), {}, {})
    ctl.on_batch(1, stats(2), {}, {})
    # Batch 2 replays offsets planned before the restart: no input then.
    restarted = Controller(ctl.log, ctl.sources, ctl.upstreams, clock=ManualClock(0), engine=EngineHooks(2))
    restarted.end_input_when(lambda: True)
    assert restarted.on_batch(2, [], {}, {}).next_watermark < MAX_TIMESTAMP
    assert restarted.on_batch(3, [], {}, {}).next_watermark == MAX_TIMESTAMP


def test_a_direct_request_is_not_taken_back_by_a_source_that_is_not_done(tmp_path):
    ctl = controller(tmp_path)
    ctl.end_input_when(lambda: False)
    assert ctl.on_batch(0, [], {}, {}).next_watermark < MAX_TIMESTAMP, "the source says it is not done"
    ctl.end_input()
    assert ctl.on_batch(1, [], {}, {}).next_watermark == MAX_TIMESTAMP


def test_a_bounded_batch_planned_to_read_nothing_is_the_flush_itself(tmp_path):
    """The batch Spark planned without new input runs at MAX (no batch that reads nothing before the flush); the
    decision is logged, so a replay after a restart flushes in the same batch."""
    planned_empty = {2}
    ctl = controller(tmp_path, EngineHooks(reads_no_new_input=planned_empty.__contains__))
    ctl.end_input_when(lambda: True)
    for batch in (0, 1):
        assert ctl.begin_batch(batch).watermark < MAX_TIMESTAMP
        ctl.on_batch(batch, stats(3), {}, {})
    assert ctl.begin_batch(2).watermark == MAX_TIMESTAMP
    report = ctl.on_batch(2, [], {}, {})
    assert report.watermark == report.next_watermark == MAX_TIMESTAMP
    assert ctl.next_batch is not None and ctl.next_batch.waits_for_input, "nothing can fire after the flush"

    replay = Controller(ctl.log, ctl.sources, ctl.upstreams, clock=ManualClock(0), engine=EngineHooks(2))
    assert replay.begin_batch(2).watermark == MAX_TIMESTAMP, "the restart's first batch, but logged as the flush"
    assert replay.logged(2) == ctl.logged(2)
    replay.ensure_initial_entry()
    assert ctl.log.ends_input(2), "kept while its entry is"
    ctl.log.prune_end_markers(3)
    assert not ctl.log.ends_input(2) and (tmp_path / f"{2:012d}.json").exists(), "a query start prunes old ones"


def test_the_flush_is_not_folded_into_a_restarts_first_batch_nor_into_an_unbounded_run(tmp_path):
    ctl = controller(tmp_path, EngineHooks(reads_no_new_input=lambda batch: True))
    for batch in (0, 1):
        assert ctl.begin_batch(batch).watermark < MAX_TIMESTAMP, "no bounded run asked for"
        ctl.on_batch(batch, stats(3), {}, {})
    restarted = Controller(
        ctl.log, ctl.sources, ctl.upstreams, clock=ManualClock(0), engine=EngineHooks(2, reads_no_new_input=bool)
    )
    restarted.end_input_when(lambda: True)
    assert restarted.begin_batch(2).watermark < MAX_TIMESTAMP, "offsets planned before the restart say nothing"
    restarted.on_batch(2, [], {}, {})
    assert restarted.begin_batch(3).watermark == MAX_TIMESTAMP


def test_a_request_to_end_the_input_is_taken_from_the_next_batch_that_begins(tmp_path):
    """How a Spark Connect client ends a run's input (the controller runs in the server): the request is checked
    as each batch begins; until it is made the run is not bounded (every trigger does not run a batch)."""
    made = []
    ctl = controller(tmp_path, EngineHooks(reads_no_new_input=lambda batch: batch >= 2))
    ctl.end_input_when_requested(lambda: bool(made), lambda: True)
    for batch in (0, 1, 2):
        assert ctl.begin_batch(batch).watermark < MAX_TIMESTAMP, "no request yet"
        ctl.on_batch(batch, stats(3) if batch < 2 else [], {}, {})
    assert ctl.next_batch is not None and ctl.next_batch.waits_for_input, "an unbounded run waits for input"
    made.append(True)
    assert ctl.begin_batch(3).watermark == MAX_TIMESTAMP, "the request's first batch planned nothing: the flush"
    carried = Controller(ctl.log, ctl.sources, ctl.upstreams, clock=ManualClock(0), earlier=ctl)
    assert carried.end_of_input.on_request is ctl.end_of_input.on_request, "a restart by the handle keeps the request"
