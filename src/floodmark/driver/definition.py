"""A job's definition as data: written into its checkpoint when it starts, read back by the tools.

``<checkpoint>/floodmark/definition.json`` holds what a query was started with: each source's watermark settings
and how it reads event time and splits, each stage's windowing, aggregate, trigger and keys, and where each
stage's outputs go. ``floodmark explain <checkpoint>`` explains a window of a job defined in Python from it, and
``floodmark replay --like <checkpoint>`` runs files through the same job. The TOML/JSON pipeline files of
``floodmark replay --config`` use the same forms for triggers, windows and aggregates (:func:`trigger_from`...).

Built-in windows, triggers, aggregates and watermark strategies are data (``{"kind": "tumbling", "size":
60000}``: durations in ms). User code is named by its import path (``{"kind": "generator", "factory":
"mypackage.watermarks:make"}``): a module-level function or class, importable where the tool runs. What cannot
be named (a lambda, a closure) is written as ``{"kind": "unnamed", "description": ...}`` and refused, with the
reason, by the reader: such a job is explained from Python (``Pipeline.explain``).

The format is versioned (:data:`FORMAT`); a reader refuses a newer one by name.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from floodmark import __version__
from floodmark.core import aggregates, triggers, windows
from floodmark.core.join import WindowJoinSpec
from floodmark.core.join.spec import IntervalJoinSpec
from floodmark.core.panes import AccumulationMode
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.time import parse_duration
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import WatermarkStrategy
from floodmark.core.watermarks.strategy import import_path
from floodmark.driver import checkpoint_layout
from floodmark.driver.checkpoint_files import CheckpointFiles
from floodmark.driver.controller import SourceSettings

FORMAT = 2
"""The definition format this floodmark writes and the newest it reads (2: a stage may be a join)."""


class NotDescribable(ValueError):
    """A definition names something the reader cannot rebuild (a lambda, code that does not import)."""


# ------------------------------------------------------------------ windows
_WINDOWS: dict[str, type[windows.WindowAssigner]] = {
    "tumbling": windows.Tumbling,
    "sliding": windows.Sliding,
    "cumulate": windows.Cumulate,
    "sessions": windows.Sessions,
    "global": windows.Global,
}


def describe_window(window: windows.WindowAssigner) -> dict[str, Any]:
    """``{"kind": "tumbling", "size": ms, "offset": ms}`` and the like (every field of the assigner, in ms)."""
    kind = next((name for name, cls in _WINDOWS.items() if type(window) is cls), None)
    if kind is None:
        return {"kind": "unnamed", "description": f"{type(window).__name__} (your own window assigner)"}
    return {"kind": kind, **{name: value for name, value in vars(window).items() if not name.startswith("_")}}


def window_from(data: Mapping[str, Any]) -> windows.WindowAssigner:
    """The window assigner :func:`describe_window` describes (durations as ms or text: ``"1 minute"``)."""
    kind, fields = _kind(data, _WINDOWS, "window")
    return _WINDOWS[kind](**{name: parse_duration(value) for name, value in fields.items()})  # type: ignore[arg-type]


# ------------------------------------------------------------------ triggers
def describe_trigger(trigger: triggers.Trigger) -> dict[str, Any]:
    """A trigger tree as data: ``{"kind": "after_watermark", "early": {"kind": "after_count", "count": 3}}``."""
    match trigger:
        case triggers.Default():
            return {"kind": "default"}
        case triggers.Never():
            return {"kind": "never"}
        case triggers.AfterCount():
            return {"kind": "after_count", "count": trigger.count}
        case triggers.AfterProcessingTime():
            return {"kind": "after_processing_time", "delay": trigger.delay}
        case triggers.Repeatedly():
            return {"kind": "repeatedly", "trigger": describe_trigger(trigger.trigger)}
        case triggers.AfterWatermark():
            early = None if trigger.early is None else describe_trigger(trigger.early.trigger)
            late = None if trigger.late is None else describe_trigger(trigger.late.trigger)
            return {
                "kind": "after_watermark",
                **({"early": early} if early else {}),
                **({"late": late} if late else {}),
            }
        case triggers.AfterAny() | triggers.AfterAll() | triggers.AfterEach():
            kind = {triggers.AfterAny: "after_any", triggers.AfterAll: "after_all", triggers.AfterEach: "after_each"}
            return {"kind": kind[type(trigger)], "triggers": [describe_trigger(t) for t in trigger.triggers]}
        case triggers.OrFinally():
            return {
                "kind": "or_finally",
                "trigger": describe_trigger(trigger.trigger),
                "until": describe_trigger(trigger.until),
            }
    return {"kind": "unnamed", "description": repr(trigger)}


def trigger_from(data: Mapping[str, Any]) -> triggers.Trigger:
    """The trigger :func:`describe_trigger` describes (a delay as ms or text: ``"10 seconds"``).

    :raises ValueError: an unknown kind or a field it does not take.
    """
    kinds = {
        "default": lambda: triggers.Default(),
        "never": lambda: triggers.Never(),
        "after_count": lambda count: triggers.AfterCount(int(count)),
        "after_processing_time": lambda delay: triggers.AfterProcessingTime(parse_duration(delay)),
        "repeatedly": lambda trigger: triggers.Repeatedly(trigger_from(trigger)),
        "after_watermark": lambda early=None, late=None: triggers.AfterWatermark(
            early=None if early is None else trigger_from(early), late=None if late is None else trigger_from(late)
        ),
        "after_any": lambda triggers_: triggers.AfterAny(*map(trigger_from, triggers_)),
        "after_all": lambda triggers_: triggers.AfterAll(*map(trigger_from, triggers_)),
        "after_each": lambda triggers_: triggers.AfterEach(*map(trigger_from, triggers_)),
        "or_finally": lambda trigger, until: triggers.OrFinally(trigger_from(trigger), trigger_from(until)),
    }
    kind, fields = _kind(data, kinds, "trigger")
    if "triggers" in fields:
        fields = {"triggers_": fields.pop("triggers"), **fields}
    try:
        return kinds[kind](**fields)  # type: ignore[operator]
    except TypeError as error:
        raise ValueError(f"trigger {kind!r}: {error}") from None


# ------------------------------------------------------------------ aggregates
_AGGREGATES: dict[str, type[aggregates.Aggregate]] = {
    "count": aggregates.Count,
    "sum": aggregates.Sum,
    "min": aggregates.Min,
    "max": aggregates.Max,
    "mean": aggregates.Mean,
    "collect_list": aggregates.CollectList,
}


def describe_aggregate(aggregate: aggregates.Aggregate) -> dict[str, Any]:
    """``{"kind": "mean", "field": "price"}``; several as ``{"kind": "several", "parts": {name: ...}}``."""
    if isinstance(aggregate, aggregates.Several):
        return {"kind": "several", "parts": {name: describe_aggregate(a) for name, a in aggregate.parts.items()}}
    kind = next((name for name, cls in _AGGREGATES.items() if type(aggregate) is cls), None)
    if kind is None:
        return {"kind": "unnamed", "description": f"{type(aggregate).__name__} (your own aggregate)"}
    field_name = getattr(aggregate, "field", None)
    return {"kind": kind, **({"field": field_name} if field_name is not None else {})}


def aggregate_from(data: Mapping[str, Any] | str) -> aggregates.Aggregate:
    """The aggregate :func:`describe_aggregate` describes, or its short text form: ``"count"``, ``"sum:price"``,
    ``"collect_list:device"``."""
    if isinstance(data, str):
        kind, _, field_name = data.partition(":")
        data = {"kind": kind, **({"field": field_name} if field_name else {})}
    if data.get("kind") == "several":
        return aggregates.Several({name: aggregate_from(part) for name, part in data["parts"].items()})
    kind, fields = _kind(data, _AGGREGATES, "aggregate")
    return _AGGREGATES[kind](**fields)


# ------------------------------------------------------------------ specs
def describe_spec(spec: WindowSpec) -> dict[str, Any]:
    return {
        "window": describe_window(spec.window),
        "aggregate": describe_aggregate(spec.aggregate),
        "trigger": describe_trigger(spec.trigger),
        "allowed_lateness": spec.allowed_lateness,
        "accumulation": spec.accumulation.name.lower(),
        "timestamp_combiner": spec.timestamp_combiner.name.lower(),
    }


def spec_from(data: Mapping[str, Any]) -> WindowSpec:
    return WindowSpec(
        window_from(data["window"]),
        aggregate_from(data["aggregate"]),
        trigger=trigger_from(data.get("trigger", {"kind": "default"})),
        allowed_lateness=parse_duration(data.get("allowed_lateness", 0)),
        accumulation=AccumulationMode[str(data.get("accumulation", "discarding")).upper()],
        timestamp_combiner=TimestampCombiner[str(data.get("timestamp_combiner", "end_of_window")).upper()],
    )


# ------------------------------------------------------------------ watermark strategies
def describe_strategy(strategy: WatermarkStrategy) -> dict[str, Any]:
    """The strategy's recipe (:attr:`WatermarkStrategy.recipe`), its idleness, alignment and timestamp assigner."""
    recipe = dict(strategy.recipe) if strategy.recipe else {"kind": "unnamed", "description": strategy.description}
    if strategy.idle_timeout_ms is not None:
        recipe["idleness"] = strategy.idle_timeout_ms
        if strategy.idle_advance:
            recipe["idle_advance"] = True
    if strategy.alignment is not None:
        recipe["alignment"] = {"group": strategy.alignment.group, "max_drift": strategy.alignment.max_drift_ms}
    if strategy.timestamp_assigner is not None:
        recipe["timestamp_assigner"] = import_path(strategy.timestamp_assigner) or "unnamed"
    return recipe


def strategy_from(data: Mapping[str, Any]) -> WatermarkStrategy:
    """The strategy :func:`describe_strategy` describes (durations as ms or text).

    :raises NotDescribable: an unnamed generator or assigner, or one whose import path does not import here.
    """
    fields = dict(data)
    kind = fields.pop("kind", None)
    idleness = fields.pop("idleness", None)
    idle_advance = bool(fields.pop("idle_advance", False))
    alignment = fields.pop("alignment", None)
    assigner = fields.pop("timestamp_assigner", None)
    if kind == "bounded_out_of_orderness":
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(parse_duration(fields["bound"]))
    elif kind == "monotonous_timestamps":
        strategy = WatermarkStrategy.for_monotonous_timestamps()
    elif kind == "legacy_bounded_out_of_orderness":
        bound = parse_duration(fields["bound"])
        strategy = WatermarkStrategy.for_legacy_bounded_out_of_orderness(bound, bool(fields.get("punctuated")))
    elif kind == "idle_advancing":
        strategy = WatermarkStrategy.for_idle_advancing(
            parse_duration(fields["bound"]), parse_duration(fields["wait"]), parse_duration(fields.get("interval", 200))
        )
    elif kind == "generator":
        strategy = WatermarkStrategy.for_generator(imported(fields["factory"], "the watermark generator"))
    elif kind == "unnamed":
        raise NotDescribable(
            f"the watermark generator ({fields.get('description')}) has no import path (a lambda or a nested "
            "function): give WatermarkStrategy.for_generator a module-level function"
        )
    else:
        raise ValueError(f"unknown watermark strategy {kind!r}")
    if idleness is not None:
        strategy = strategy.with_idleness(parse_duration(idleness), advance=idle_advance)
    if alignment is not None:
        strategy = strategy.with_watermark_alignment(alignment["group"], parse_duration(alignment["max_drift"]))
    if assigner is not None:
        strategy = strategy.with_timestamp_assigner(imported(assigner, "the timestamp assigner"))
    return strategy


def imported(path: str, what: str) -> Any:
    """The object at ``module:qualified.name``.

    :raises NotDescribable: ``unnamed``, or it does not import here.
    """
    module, _, name = path.partition(":")
    if path == "unnamed" or not name:
        raise NotDescribable(f"{what} has no import path (a lambda or a nested function)")
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise NotDescribable(f"{what} {path!r} does not import here: {error}") from None
    return found


# ------------------------------------------------------------------ the job
@dataclass(frozen=True)
class SourceDefinition:
    """How one source's records get their event time and split, and how its watermark is made.

    :ivar event_time: ``{"column": name}`` or ``{"expression": SQL text}``. :ivar split: likewise, or None.
    """

    settings: SourceSettings
    event_time: Mapping[str, str]
    split: Mapping[str, str] | None = None
    time_zone: str = "UTC"
    max_future_skew: int | None = None


def describe_stage(stage: WindowedStage | JoinStage | ProcessStage) -> dict[str, Any]:
    """A stage as data: a window stage's upstreams, keys, derived columns and spec; a join's (``"kind": "join"``)
    inputs, keys, bounds (ms), kind, output time and allowed lateness (ms); a window join's (``"kind":
    "window_join"``) inputs, keys, window and allowed lateness; a process stage's (``"kind":
    "process"``) upstreams, keys, output columns and its function's class by import path (rebuilt with no
    arguments; ``None``: a class that does not import by name)."""
    if isinstance(stage, ProcessStage):
        return {
            "kind": "process",
            "upstream": list(stage.upstream),
            "key_by": list(stage.key_by),
            "output": dict(stage.output),
            "function": import_path(type(stage.function)),
        }
    if isinstance(stage, JoinStage) and isinstance(stage.spec, WindowJoinSpec):
        return {
            "kind": "window_join",
            "left": stage.left,
            "right": stage.right,
            "on": list(stage.on),
            "window": describe_window(stage.spec.window),
            "allowed_lateness": stage.spec.allowed_lateness,
        }
    if isinstance(stage, JoinStage):
        spec = stage.spec
        return {
            "kind": "join",
            "left": stage.left,
            "right": stage.right,
            "on": list(stage.on),
            "between": [spec.lower, spec.upper],
            "how": spec.how.value,
            "output_time": spec.output_time.value,
            "allowed_lateness": spec.allowed_lateness,
        }
    return {
        "upstream": list(stage.upstream),
        "key_by": list(stage.key_by),
        "columns": dict(stage.columns),
        "spec": describe_spec(stage.spec),
    }


@dataclass(frozen=True)
class UnavailableFunction:
    """Stands for a process stage's function that cannot be rebuilt here (its class does not import, or needs
    arguments): enough for what reads the stage's place in the graph (explaining another stage); calling it raises
    :class:`NotDescribable` with ``reason``."""

    reason: str

    def process(self, record: Any, ctx: Any) -> None:
        raise NotDescribable(self.reason)

    def on_timer(self, timer: Any, ctx: Any) -> None:
        raise NotDescribable(self.reason)


def stage_from(
    name: str, data: Mapping[str, Any], functions_optional: bool = False
) -> WindowedStage | JoinStage | ProcessStage:
    """The stage :func:`describe_stage` described.

    :arg functions_optional: a process function that cannot be rebuilt becomes an :class:`UnavailableFunction`.
    :raises NotDescribable: a process stage whose function's class does not import here or takes arguments."""
    if data.get("kind") == "process":
        path = data.get("function")
        try:
            if path is None:
                raise NotDescribable(
                    f"stage {name!r} runs a process function whose class has no import path (defined in __main__ or "
                    "in a function): define it in a module this process can import"
                )
            try:
                function = imported(path, f"stage {name!r}'s process function")()
            except TypeError as error:
                raise NotDescribable(f"stage {name!r}'s process function {path} needs arguments: {error}") from error
        except NotDescribable as error:
            if not functions_optional:
                raise
            function = UnavailableFunction(str(error))
        return ProcessStage(name, tuple(data["upstream"]), tuple(data["key_by"]), function, dict(data["output"]))
    if data.get("kind") == "window_join":
        spec = WindowJoinSpec(window_from(data["window"]), int(data.get("allowed_lateness", 0)))
        return JoinStage(name, data["left"], data["right"], tuple(data["on"]), spec)
    if data.get("kind") == "join":
        spec = IntervalJoinSpec(
            tuple(data["between"]), data["how"], data["output_time"], int(data.get("allowed_lateness", 0))
        )
        return JoinStage(name, data["left"], data["right"], tuple(data["on"]), spec)
    return WindowedStage(
        name,
        tuple(data["upstream"]),
        spec_from(data["spec"]),
        tuple(data.get("key_by", ())),
        dict(data.get("columns", {})),
    )


@dataclass(frozen=True)
class JobDefinition:
    """A query's sources, stages and file outputs (``{stage: {"panes": path, ...}}``, file sinks only)."""

    sources: dict[str, SourceDefinition]
    stages: dict[str, WindowedStage | JoinStage | ProcessStage]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "floodmark": __version__,
            "sources": {
                name: {
                    "watermarks": describe_strategy(s.settings.strategy),
                    "periodic_interval": s.settings.periodic_interval,
                    "percentile": s.settings.percentile,
                    "known_splits": list(s.settings.splits),
                    "event_time": dict(s.event_time),
                    "split": None if s.split is None else dict(s.split),
                    "time_zone": s.time_zone,
                    "max_future_skew": s.max_future_skew,
                }
                for name, s in self.sources.items()
            },
            "stages": {name: describe_stage(stage) for name, stage in self.stages.items()},
            "outputs": self.outputs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], functions_optional: bool = False) -> JobDefinition:
        """:arg functions_optional: see :func:`stage_from`.

        :raises ValueError: a newer format. :raises NotDescribable: code that cannot be rebuilt here."""
        written = int(data.get("format", 0))
        if written > FORMAT:
            raise ValueError(
                f"the job definition has format {written} (floodmark {data.get('floodmark')}); this floodmark "
                f"({__version__}) reads up to {FORMAT}: use that floodmark or a newer one"
            )
        sources = {
            name: SourceDefinition(
                SourceSettings(
                    strategy_from(s["watermarks"]),
                    int(s.get("periodic_interval", 200)),
                    float(s.get("percentile", 100.0)),
                    tuple(str(k) for k in s.get("known_splits", ())),
                ),
                s["event_time"],
                s.get("split"),
                s.get("time_zone", "UTC"),
                s.get("max_future_skew"),
            )
            for name, s in data["sources"].items()
        }
        stages = {name: stage_from(name, s, functions_optional) for name, s in data["stages"].items()}
        return cls(sources, stages, {k: dict(v) for k, v in data.get("outputs", {}).items()})

    def write(self, files: CheckpointFiles, checkpoint: str) -> None:
        """Into ``<checkpoint>/floodmark/definition.json`` (replacing the one of an earlier start)."""
        path = definition_path(checkpoint)
        files.delete(path)
        files.write_once(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def read(cls, files: CheckpointFiles, checkpoint: str, functions_optional: bool = False) -> JobDefinition:
        """:arg functions_optional: see :func:`stage_from` (what explains a stage needs the others' place only).

        :raises FileNotFoundError: the checkpoint has no definition (a query started before floodmark wrote
        them, or not a floodmark checkpoint)."""
        text = files.read_text(definition_path(checkpoint))
        if text is None:
            raise FileNotFoundError(f"{checkpoint} holds no job definition ({definition_path(checkpoint)})")
        return cls.from_dict(json.loads(text), functions_optional)


def definition_path(checkpoint: str) -> str:
    return checkpoint_layout.floodmark_path(checkpoint, checkpoint_layout.DEFINITION)


def column_or_expression(value: Any) -> dict[str, str]:
    """A column name as ``{"column": name}``; a PySpark Column as ``{"expression": its SQL text}`` (what
    ``F.expr`` reads back for most expressions)."""
    if isinstance(value, str):
        return {"column": value}
    text = str(value)
    if text.startswith("Column<'") and text.endswith("'>"):
        text = text[len("Column<'") : -len("'>")]
    return {"expression": text}


def _kind(data: Mapping[str, Any], kinds: Mapping[str, Any], what: str) -> tuple[str, dict[str, Any]]:
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind == "unnamed":
        raise NotDescribable(f"the {what} ({fields.get('description')}) is your own code: explain it from Python")
    if kind not in kinds:
        raise ValueError(f"unknown {what} kind {kind!r}: use one of {', '.join(sorted(kinds))}")
    return str(kind), fields
