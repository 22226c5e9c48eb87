"""A pipeline as configuration: what ``floodmark replay`` reads and what ``floodmark demo`` saves.

A small JSON or TOML file (or the CLI's options) describes one windowed
aggregation; :meth:`PipelineConfig.aggregation` turns it into an
:class:`~floodmark.spark.EventTimeAggregation` over any streaming DataFrame.
Durations are milliseconds or strings with a unit (``"50s"``, ``"1m"``,
``"250ms"``, ``"2h"``)::

    event_time = "ts"
    key_by = ["channel", "behavior"]
    split = "split"
    window = {kind = "tumbling", size = "1m"}
    out_of_orderness = "50s"
    idleness = "5s"
    aggregations = {count = "count"}

Aggregations are ``{output column: "count" | "sum:<field>" | "min:<field>" |
"max:<field>" | "mean:<field>"}``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from floodmark.core import aggregates, windows
from floodmark.core.panes import AccumulationMode
from floodmark.core.spec import WindowSpec
from floodmark.core.time import parse_duration
from floodmark.core.watermarks import WatermarkStrategy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from floodmark.spark import EventTimeAggregation, SourceTime

Millis = Annotated[int, BeforeValidator(parse_duration)]

_AGGREGATES = {
    "count": aggregates.count,
    "sum": aggregates.sum,
    "min": aggregates.min,
    "max": aggregates.max,
    "mean": aggregates.mean,
}


class WindowConfig(BaseModel):
    """``kind`` tumbling (``size``), sliding (``size``, ``slide``) or sessions (``gap``)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["tumbling", "sliding", "sessions"] = "tumbling"
    size: Millis | None = None
    slide: Millis | None = None
    gap: Millis | None = None

    @model_validator(mode="after")
    def _complete(self) -> WindowConfig:
        needs = {"tumbling": ["size"], "sliding": ["size", "slide"], "sessions": ["gap"]}[self.kind]
        missing = [name for name in needs if not getattr(self, name)]
        if missing:
            raise ValueError(f"a {self.kind} window needs {' and '.join(missing)} (> 0)")
        return self

    def assigner(self) -> windows.WindowAssigner:
        if self.kind == "tumbling":
            return windows.Tumbling(self.size)
        if self.kind == "sliding":
            return windows.Sliding(self.size, self.slide)
        return windows.Sessions(self.gap)


class PipelineConfig(BaseModel):
    """One keyed, windowed event-time aggregation (see the module docstring).

    :ivar event_time: column with the event time (long ms, timestamp, or text).
    :ivar split: column naming the input split (Kafka's ``partition``); ``None`` = one split.
    :ivar out_of_orderness: the bounded-out-of-orderness watermark bound.
    :ivar idleness: a split without records for this long (processing time) stops
        holding the watermark back; ``None`` = never.
    :ivar allowed_lateness: records up to this far behind the watermark still
        update their window (LATE panes); later ones go to the late output.
    """

    model_config = ConfigDict(extra="forbid")
    event_time: str = "ts"
    key_by: list[str] = Field(min_length=1)
    split: str | None = None
    window: WindowConfig
    out_of_orderness: Millis = 0
    idleness: Millis | None = None
    allowed_lateness: Millis = 0
    accumulation: Literal["discarding", "accumulating"] = "discarding"
    aggregations: dict[str, str] = Field(default_factory=lambda: {"count": "count"}, min_length=1)
    max_future_skew: Millis | None = None

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
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(self.out_of_orderness)
        return strategy.with_idleness(self.idleness) if self.idleness else strategy

    def window_spec(self) -> WindowSpec:
        """The core spec of this pipeline (what the operators run)."""
        return WindowSpec(
            window=self.window.assigner(),
            aggregate=aggregates.several(**self.aggregate_map()),
            allowed_lateness=self.allowed_lateness,
            accumulation=AccumulationMode(self.accumulation.upper()),
        )

    def aggregate_map(self) -> dict[str, aggregates.Aggregate]:
        out = {}
        for name, text in self.aggregations.items():
            kind, _, field = text.partition(":")
            out[name] = _AGGREGATES[kind]() if kind == "count" else _AGGREGATES[kind](field)
        return out

    def source_time(self, known_splits: Sequence[str] = ()) -> SourceTime:
        """How the input's watermark is made (strategy, split column, the splits known before their first
        record, e.g. a Kafka topic's partitions)."""
        from floodmark.spark import SourceTime

        return SourceTime(self.strategy(), split=self.split, known_splits=known_splits)

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
        )
