"""A pipeline as configuration: what ``floodmark replay`` reads and what ``floodmark demo`` saves.

A small JSON or TOML file (or the CLI's options) describes one windowed
aggregation; :meth:`PipelineConfig.aggregation` turns it into an
:class:`~floodmark.spark.EventTimeAggregation` over any streaming DataFrame.
Durations are milliseconds (numbers) or strings with a unit (``"50s"``, ``"1m"``,
``"250ms"``, ``"2h"``; ``"30"`` is refused: seconds or milliseconds?)::

    event_time = "ts"
    key_by = ["channel", "behavior"]
    split = "split"
    window = {kind = "tumbling", size = "1m"}
    out_of_orderness = "50s"
    idleness = "5s"
    aggregations = {count = "count"}

Aggregations are ``{output column: "count" | "sum:<field>" | "min:<field>" |
"max:<field>" | "mean:<field>" | "collect_list:<field>"}``. Everything else a
job defined in Python can say about its windowing is here too, in the forms of
:mod:`floodmark.driver.definition` (what a checkpoint records)::

    trigger = {kind = "after_watermark", early = {kind = "after_count", count = 100}}
    timestamp_combiner = "earliest"        # end_of_window (default), earliest or latest
    watermarks = {kind = "idle_advancing", bound = "5s", wait = "30s"}   # instead of out_of_orderness
    known_splits = ["0", "1", "2", "3"]
    percentile = 90                        # combine splits by the 90th percentile instead of MIN
    time_zone = "Europe/Berlin"            # for event-time text without an offset
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from floodmark.core import aggregates, windows
from floodmark.core.panes import AccumulationMode
from floodmark.core.spec import WindowSpec
from floodmark.core.time import parse_duration
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.driver.definition import aggregate_from, strategy_from, trigger_from

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from floodmark.spark import EventTimeAggregation, SourceTime

Millis = Annotated[int, BeforeValidator(parse_duration)]

_AGGREGATES = ("count", "sum", "min", "max", "mean", "collect_list")


class WindowConfig(BaseModel):
    """``kind`` tumbling (``size``), sliding (``size``, ``slide``), cumulate (``step``, ``max_size``: windows
    growing by ``step`` from each ``max_size`` epoch's start), sessions (``gap``) or global; ``offset`` shifts the
    grid of the first three."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["tumbling", "sliding", "cumulate", "sessions", "global"] = "tumbling"
    size: Millis | None = None
    slide: Millis | None = None
    step: Millis | None = None
    max_size: Millis | None = None
    gap: Millis | None = None
    offset: Millis = 0

    @model_validator(mode="after")
    def _complete(self) -> WindowConfig:
        needs = {
            "tumbling": ["size"],
            "sliding": ["size", "slide"],
            "cumulate": ["step", "max_size"],
            "sessions": ["gap"],
            "global": [],
        }[self.kind]
        missing = [name for name in needs if not getattr(self, name)]
        if missing:
            raise ValueError(f"a {self.kind} window needs {' and '.join(missing)} (> 0)")
        return self

    def assigner(self) -> windows.WindowAssigner:
        if self.kind == "tumbling":
            return windows.Tumbling(self.size, self.offset)
        if self.kind == "sliding":
            return windows.Sliding(self.size, self.slide, self.offset)
        if self.kind == "cumulate":
            return windows.Cumulate(self.step, self.max_size, self.offset)
        if self.kind == "global":
            return windows.Global()
        return windows.Sessions(self.gap)


class PipelineConfig(BaseModel):
    """One keyed, windowed event-time aggregation (see the module docstring).

    :ivar event_time: column with the event time (long ms, timestamp, or text).
    :ivar split: column naming the input split (Kafka's ``partition``); ``None`` = one split.
    :ivar out_of_orderness: the bounded-out-of-orderness watermark bound.
    :ivar idleness: a split without records for this long (processing time) stops
        holding the watermark back once caught up; ``None`` = never.
    :ivar idle_advance: with ``idleness``, an idle split's watermark goes on with processing time (the last
        windows fire when every split has gone quiet).
    :ivar allowed_lateness: records up to this far behind the watermark still
        update their window (LATE panes); later ones go to the late output.
    :ivar trigger: when panes fire, as :func:`floodmark.driver.definition.trigger_from` reads it (default:
        once, when the watermark passes the window's end, and once per late record).
    :ivar watermarks: another generator than ``out_of_orderness``'s, as
        :func:`floodmark.driver.definition.strategy_from` reads it (``idleness`` still applies).
    :ivar known_splits: splits that hold the watermark back before their first record.
    :ivar percentile: 100 combines the splits' watermarks by MIN; lower by that percentile.
    :ivar time_zone: the zone of event-time text without an offset (and of ``TIMESTAMP_NTZ`` values).
    """

    model_config = ConfigDict(extra="forbid")
    event_time: str = "ts"
    key_by: list[str] = Field(min_length=1)
    split: str | None = None
    window: WindowConfig
    out_of_orderness: Millis = 0
    idleness: Millis | None = None
    idle_advance: bool = False
    allowed_lateness: Millis = 0
    accumulation: Literal["discarding", "accumulating"] = "discarding"
    aggregations: dict[str, str] = Field(default_factory=lambda: {"count": "count"}, min_length=1)
    max_future_skew: Millis | None = None
    trigger: dict[str, Any] | None = None
    timestamp_combiner: Literal["end_of_window", "earliest", "latest"] = "end_of_window"
    watermarks: dict[str, Any] | None = None
    known_splits: list[str] = Field(default_factory=list)
    percentile: float = Field(default=100.0, gt=0, le=100)
    periodic_interval: Millis = 200
    time_zone: str = "UTC"

    @field_validator("trigger")
    @classmethod
    def _known_trigger(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            trigger_from(value)
        return value

    @field_validator("watermarks")
    @classmethod
    def _known_watermarks(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            strategy_from(value)
        return value

    @field_validator("aggregations")
    @classmethod
    def _known_aggregates(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            kind, _, field = text.partition(":")
            if kind not in _AGGREGATES:
                raise ValueError(f"aggregation {name!r}: unknown aggregate {kind!r} (use one of {sorted(_AGGREGATES)})")
            if kind != "count" and not field:
                raise ValueError(f"aggregation {name!r}: {kind} needs a field, e.g. '{kind}:price'")
        return value

    @classmethod
    def from_file(cls, path: str | Path) -> PipelineConfig:
        """Read a ``.json`` or ``.toml`` file (raises ``ValueError`` with every problem found)."""
        path = Path(path)
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return cls.model_validate(data)

    def strategy(self) -> WatermarkStrategy:
        if self.watermarks is not None:
            strategy = strategy_from(self.watermarks)
        else:
            strategy = WatermarkStrategy.for_bounded_out_of_orderness(self.out_of_orderness)
        return strategy.with_idleness(self.idleness, advance=self.idle_advance) if self.idleness else strategy

    def window_spec(self) -> WindowSpec:
        """The core spec of this pipeline (what the operators run)."""
        return WindowSpec(
            window=self.window.assigner(),
            aggregate=aggregates.several(**self.aggregate_map()),
            trigger=None if self.trigger is None else trigger_from(self.trigger),
            allowed_lateness=self.allowed_lateness,
            accumulation=AccumulationMode(self.accumulation.upper()),
            timestamp_combiner=TimestampCombiner(self.timestamp_combiner.upper()),
        )

    def aggregate_map(self) -> dict[str, aggregates.Aggregate]:
        return {name: aggregate_from(text) for name, text in self.aggregations.items()}

    def source_time(self, known_splits: Sequence[str] = ()) -> SourceTime:
        """How the input's watermark is made (strategy, split column, the splits known before their first
        record: ``known_splits`` and the file's, e.g. a Kafka topic's partitions)."""
        from floodmark.spark import SourceTime

        known = [*self.known_splits, *(s for s in known_splits if s not in self.known_splits)]
        return SourceTime(self.strategy(), self.split, self.periodic_interval, self.percentile, known_splits=known)

    def aggregation(self, source: DataFrame, known_splits: Sequence[str] = ()) -> EventTimeAggregation:
        """The Spark pipeline over ``source`` (``known_splits``: see :meth:`source_time`)."""
        from floodmark.spark import EventTimeAggregation

        return EventTimeAggregation(
            source,
            event_time=self.event_time,
            key_by=self.key_by,
            spec=self.window_spec(),
            time=self.source_time(known_splits),
            max_future_skew=self.max_future_skew,
            time_zone=self.time_zone,
        )
