"""A job's definition as data (floodmark.driver.definition): every built-in window, trigger, aggregate and
watermark strategy survives the round trip; what cannot be rebuilt is refused with the reason."""

from __future__ import annotations

import json

import pytest

from floodmark import AccumulationMode, TimestampCombiner, WatermarkStrategy, WindowSpec, aggregates, triggers, windows
from floodmark.core.pipeline import WindowedStage
from floodmark.driver.controller import SourceSettings
from floodmark.driver.definition import (
    FORMAT,
    JobDefinition,
    NotDescribable,
    SourceDefinition,
    describe_spec,
    describe_strategy,
    describe_trigger,
    spec_from,
    strategy_from,
    trigger_from,
)

TRIGGERS = [
    triggers.Default(),
    triggers.Never(),
    triggers.AfterCount(3),
    triggers.AfterProcessingTime("10 seconds"),
    triggers.Repeatedly(triggers.AfterCount(2)),
    triggers.AfterWatermark(),
    triggers.AfterWatermark(early=triggers.AfterProcessingTime(500), late=triggers.AfterCount(1)),
    triggers.AfterAny(triggers.AfterCount(5), triggers.AfterProcessingTime(1000)),
    triggers.AfterAll(triggers.AfterCount(5), triggers.AfterProcessingTime(1000)),
    triggers.AfterEach(triggers.AfterCount(1), triggers.AfterWatermark()),
    triggers.OrFinally(triggers.Repeatedly(triggers.AfterCount(2)), triggers.AfterWatermark()),
]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: type(t).__name__)
def test_every_built_in_trigger_round_trips(trigger):
    described = describe_trigger(trigger)
    assert json.loads(json.dumps(described)) == described
    assert describe_trigger(trigger_from(described)) == described
    assert repr(trigger_from(described)) == repr(trigger)


@pytest.mark.parametrize(
    "window",
    [
        windows.Tumbling("1 minute", offset=5),
        windows.Sliding(600_000, 60_000),
        windows.Cumulate("1 hour", "1 day", offset="19 hours"),
        windows.Sessions("30s"),
        windows.Global(),
    ],
)
def test_specs_round_trip(window):
    spec = WindowSpec(
        window,
        {
            "n": aggregates.count(),
            "s": aggregates.sum("x"),
            "lo": aggregates.min("x"),
            "hi": aggregates.max("x"),
            "m": aggregates.mean("x"),
            "all": aggregates.collect_list("y"),
        },
        trigger=triggers.AfterWatermark(early=triggers.AfterCount(2)),
        allowed_lateness="5 minutes",
        accumulation=AccumulationMode.ACCUMULATING,
        timestamp_combiner=TimestampCombiner.EARLIEST,
    )
    assert describe_spec(spec_from(describe_spec(spec))) == describe_spec(spec)


def module_level_generator():
    from floodmark.core.watermarks.bounded import BoundedOutOfOrderness

    return BoundedOutOfOrderness(10)


@pytest.mark.parametrize(
    "strategy",
    [
        WatermarkStrategy.for_bounded_out_of_orderness("50s").with_idleness("1m"),
        WatermarkStrategy.for_monotonous_timestamps().with_idleness("5s", advance=True),
        WatermarkStrategy.for_legacy_bounded_out_of_orderness(5_000, punctuated=True),
        WatermarkStrategy.for_idle_advancing(5_000, 10_000, 100).with_watermark_alignment("g", "10 minutes"),
        WatermarkStrategy.for_generator(module_level_generator),
    ],
    ids=["bounded", "monotonous", "legacy", "idle-advancing", "generator"],
)
def test_strategies_round_trip(strategy):
    described = describe_strategy(strategy)
    assert describe_strategy(strategy_from(described)) == described
    assert strategy_from(described).idle_advance == strategy.idle_advance


def test_what_cannot_be_rebuilt_is_refused_with_the_reason():
    unnamed = WatermarkStrategy.for_generator(lambda: module_level_generator())
    assert describe_strategy(unnamed)["kind"] == "unnamed"
    with pytest.raises(NotDescribable, match="no import path"):
        strategy_from(describe_strategy(unnamed))
    with pytest.raises(NotDescribable, match="does not import here"):
        strategy_from({"kind": "generator", "factory": "nowhere.to_be:found"})
    with pytest.raises(ValueError, match="unknown trigger kind 'sometimes'"):
        trigger_from({"kind": "sometimes"})


def test_a_newer_format_is_refused_by_name():
    job = JobDefinition(
        {"s": SourceDefinition(SourceSettings(WatermarkStrategy.for_monotonous_timestamps()), {"column": "ts"})},
        {"a": WindowedStage("a", ("s",), WindowSpec(windows.Tumbling(10), {"n": aggregates.count()}), ("k",))},
    )
    data = job.to_dict()
    assert JobDefinition.from_dict(json.loads(json.dumps(data))).to_dict() == data
    with pytest.raises(ValueError, match=f"reads up to {FORMAT}"):
        JobDefinition.from_dict({**data, "format": FORMAT + 1})


def test_a_pipeline_file_expresses_every_built_in_trigger_aggregate_window_and_watermark(tmp_path):
    """What ``floodmark replay --config`` reads: the same forms as a checkpoint's definition."""
    from floodmark.apps.config import PipelineConfig

    path = tmp_path / "job.toml"
    path.write_text(
        """
event_time = "ts"
key_by = ["device"]
split = "gateway"
window = {kind = "sliding", size = "10 minutes", slide = "1 minute"}
accumulation = "accumulating"
timestamp_combiner = "earliest"
allowed_lateness = "5m"
aggregations = {n = "count", temps = "collect_list:celsius", hottest = "max:celsius"}
watermarks = {kind = "idle_advancing", bound = "5s", wait = "30s"}
idleness = "1m"
known_splits = ["g1", "g2"]
percentile = 90
time_zone = "Europe/Berlin"

[trigger]
kind = "after_watermark"
early = {kind = "after_processing_time", delay = "10s"}
late = {kind = "after_count", count = 1}
"""
    )
    config = PipelineConfig.from_file(path)
    spec = config.window_spec()
    assert describe_spec(spec) == describe_spec(
        WindowSpec(
            windows.Sliding("10 minutes", "1 minute"),
            {
                "n": aggregates.count(),
                "temps": aggregates.collect_list("celsius"),
                "hottest": aggregates.max("celsius"),
            },
            trigger=triggers.AfterWatermark(early=triggers.AfterProcessingTime(10_000), late=triggers.AfterCount(1)),
            allowed_lateness=300_000,
            accumulation=AccumulationMode.ACCUMULATING,
            timestamp_combiner=TimestampCombiner.EARLIEST,
        )
    )
    assert describe_strategy(config.strategy()) == {
        "kind": "idle_advancing",
        "bound": 5_000,
        "wait": 30_000,
        "interval": 200,
        "idleness": 60_000,
    }
    assert (config.known_splits, config.percentile, config.time_zone) == (["g1", "g2"], 90, "Europe/Berlin")
    with pytest.raises(ValueError, match="unknown trigger kind"):
        PipelineConfig.model_validate({"key_by": ["k"], "window": {"size": 1}, "trigger": {"kind": "often"}})


def test_a_job_with_code_of_its_own_is_written_and_refused_when_read():
    """Writing a definition never fails a query's start; reading what cannot be rebuilt says why."""

    class Mine(windows.Tumbling):
        pass

    spec = WindowSpec(Mine(10), {"n": aggregates.count()})
    described = describe_spec(spec)
    assert described["window"]["kind"] == "unnamed"
    assert json.loads(json.dumps(described)) == described
    with pytest.raises(NotDescribable, match="your own window assigner"):
        spec_from(described)


def test_a_job_with_a_join_round_trips():
    """The searches job: a join of two sources, then windows over its rows (``floodmark.apps.searches``)."""
    from floodmark.apps.searches import search_stages

    sources = {
        n: SourceDefinition(SourceSettings(WatermarkStrategy.for_bounded_out_of_orderness(3_000)), {"column": "ts"})
        for n in ("queries", "clicks")
    }
    for how, output_time in (("inner", "RIGHT"), ("outer", "EARLIEST")):
        job = JobDefinition(sources, {s.name: s for s in search_stages(how, output_time)})
        data = json.loads(json.dumps(job.to_dict()))
        assert data["stages"]["clicked"]["kind"] == "join"
        back = JobDefinition.from_dict(data)
        assert back.stages["clicked"] == job.stages["clicked"]
        assert back.stages["same_window"] == job.stages["same_window"], "a window join"
        assert back.to_dict() == job.to_dict()


def test_a_process_stage_round_trips_by_its_class_and_a_lambda_class_is_refused():
    from floodmark.apps.searches import ABANDONED_OUTPUT, AbandonedSearches
    from floodmark.core.pipeline import ProcessStage

    sources = {
        "queries": SourceDefinition(SourceSettings(WatermarkStrategy.for_monotonous_timestamps()), {"column": "ts"})
    }
    stage = ProcessStage("abandoned", ("queries",), ("user",), AbandonedSearches(), ABANDONED_OUTPUT)
    data = json.loads(json.dumps(JobDefinition(sources, {"abandoned": stage}).to_dict()))
    assert data["stages"]["abandoned"]["function"] == "floodmark.apps.searches:AbandonedSearches"
    back = JobDefinition.from_dict(data).stages["abandoned"]
    assert isinstance(back, ProcessStage) and isinstance(back.function, AbandonedSearches)
    assert (back.upstream, back.key_by, back.output) == (stage.upstream, stage.key_by, stage.output)

    class Local:  # defined in a function: no import path
        def process(self, record, ctx): ...

        def on_timer(self, timer, ctx): ...

    local = ProcessStage("local", ("queries",), (), Local(), {"n": "long"})
    data = json.loads(json.dumps(JobDefinition(sources, {"local": local}).to_dict()))
    with pytest.raises(NotDescribable, match="no import path"):
        JobDefinition.from_dict(data)
    # What explains another stage needs only this one's place in the graph.
    standing = JobDefinition.from_dict(data, functions_optional=True).stages["local"]
    assert isinstance(standing, ProcessStage) and standing.upstream == ("queries",)
    with pytest.raises(NotDescribable, match="no import path"):
        standing.function.process({}, None)
