"""Stages chained into a pipeline, with stage watermarks (the game-session pipeline of *Streaming Systems*, ch. 3).

Stage ``i``'s panes become stage ``i+1``'s records (key and value mapped by the
stage's ``output_key`` / ``output_value``, timestamp = the pane's output
timestamp), and stage ``i+1``'s input watermark is stage ``i``'s output
watermark: ``MIN(input watermark, hold)``, where the hold comes from the pane
timestamps the stage still owes (see :class:`~floodmark.core.timestamps.TimestampCombiner`).
With ``EARLIEST`` output timestamps an upstream session stage holds the
downstream watermark back until its sessions close: the game-session pipeline's example.

Two drivers:

* :class:`StagedPipeline`, a linear chain cascaded at once (every call runs
  every stage with its upstream's latest output watermark): the model of an
  event-at-a-time engine;
* :class:`MicroBatchPipeline`, a graph of sources and :class:`WindowedStage`
  over named columns, run one micro-batch at a time with the rule of
  :class:`~floodmark.core.watermarks.graph.StageGraph` (one batch of latency per
  stage). The Spark runtime (``floodmark.spark.driver.pipeline``) runs exactly this, and
  this class is what it is tested against.

A stage's input rows are its upstream panes as rows (:func:`pane_rows`: key
columns, ``window_start``, ``window_end``, ``pane_timestamp``, ``timing``,
``pane_index``, ``nonspeculative_index``, ``is_last`` and the aggregate
columns) with the stage's derived ``columns`` added (:func:`stage_input_rows`);
``pane_timestamp`` is their event time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from floodmark.core.aggregates import Several
from floodmark.core.emitted import Emitted
from floodmark.core.join import (
    JoinedRow,
    JoinEmitted,
    JoinOperator,
    Side,
    WindowJoinedRow,
    WindowJoinEmitted,
    WindowJoinSpec,
    join_operator,
)
from floodmark.core.join.spec import IntervalJoinSpec
from floodmark.core.keyed_operator import KeyedOperator, KeyedRows, OperatorGauges
from floodmark.core.panes import Pane
from floodmark.core.process import (
    KeyedProcessFunction,
    KeyedProcessOperator,
    ProcessEmitted,
    ProcessOutput,
    restore_process_operator,
)
from floodmark.core.records import RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks.graph import StageGraph
from floodmark.core.watermarks.stage import StageTimes, StageWatermark
from floodmark.core.window import WindowOperator, restore_operator
from floodmark.protocol import output
from floodmark.protocol.columns import names


@dataclass(frozen=True)
class Stage:
    """One windowed aggregation in a pipeline.

    :arg name: unique stage name. :arg spec: its windowing and aggregation.
    :arg output_key: ``pane -> key`` for the next stage (default: the pane's key).
    :arg output_value: ``pane -> value`` for the next stage (default: the pane's value).
    """

    name: str
    spec: WindowSpec
    output_key: Callable[[Pane], Hashable] | None = None
    output_value: Callable[[Pane], Any] | None = None


StageEmitted = Emitted | JoinEmitted | WindowJoinEmitted | ProcessEmitted
"""What a stage of any kind emits: panes, joined rows or a process function's rows, with late and bad rows."""


@dataclass
class StageResult:
    """Everything one stage emitted."""

    emitted: Any = field(default_factory=Emitted)
    """The stage's :data:`StageEmitted` (panes for a window stage)."""
    watermarks: list[tuple[int, int, int]] = field(default_factory=list)
    """``(processing_time, input_watermark, output_watermark)`` after every step."""


class StagedPipeline:
    """A linear chain of windowed stages, driven like a single operator."""

    def __init__(self, stages: Sequence[Stage], processing_time: int = 0) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        self.stages = list(stages)
        self.operators = [WindowOperator(s.spec, MIN_TIMESTAMP, processing_time, "general") for s in stages]
        self.watermarks = [StageWatermark(["input" if i == 0 else stages[i - 1].name]) for i in range(len(stages))]
        self.results = {s.name: StageResult() for s in stages}
        self.processing_time = processing_time
        self._input_watermark = MIN_TIMESTAMP

    def add_records(self, batch: RecordBatch) -> None:
        """Records into the first stage at the current watermark."""
        self._cascade(first=self.operators[0].add(batch))

    def advance_watermark(self, watermark: int) -> None:
        """The pipeline's input watermark moves to ``watermark``."""
        self._input_watermark = max(self._input_watermark, watermark)
        self._cascade()

    def advance_processing_time(self, processing_time: int) -> None:
        self.processing_time = max(self.processing_time, processing_time)
        pending = [op.advance_processing_time(self.processing_time) for op in self.operators]
        self._cascade(pending=pending)

    def stage_times(self, name: str) -> StageTimes:
        i = self._index(name)
        return self.watermarks[i].times(self.processing_time, self.operators[i].gauges().oldest_pending)

    def panes(self, name: str | None = None) -> list[Pane]:
        """Panes of stage ``name`` (default: the last stage)."""
        return self.results[name or self.stages[-1].name].emitted.all_panes()

    def _index(self, name: str) -> int:
        for i, stage in enumerate(self.stages):
            if stage.name == name:
                return i
        raise KeyError(f"no stage named {name!r}")

    def _cascade(self, first: Emitted | None = None, pending: list[Emitted] | None = None) -> None:
        carried = first
        for i, (stage, operator, marks) in enumerate(zip(self.stages, self.operators, self.watermarks, strict=True)):
            emitted = Emitted()
            if pending is not None:
                emitted.extend(pending[i])
            if i == 0:
                if carried is not None:
                    emitted.extend(carried)
                upstream_watermark = self._input_watermark
                upstream = "input"
            else:
                upstream = self.stages[i - 1].name
                upstream_watermark = self.watermarks[i - 1].output_watermark
                carried_panes = carried.all_panes() if carried is not None else []
                if carried_panes:
                    emitted.extend(operator.add(self._records_from(self.stages[i - 1], carried_panes)))
            marks.update_upstream(upstream, upstream_watermark)
            emitted.extend(operator.advance_watermark(marks.input_watermark))
            marks.update_output(operator.gauges().hold)
            result = self.results[stage.name]
            result.emitted.extend(emitted)
            result.watermarks.append((self.processing_time, marks.input_watermark, marks.output_watermark))
            carried = emitted

    @staticmethod
    def _records_from(stage: Stage, panes: list[Pane]) -> RecordBatch:
        keys = np.empty(len(panes), dtype=object)
        keys[:] = [stage.output_key(p) if stage.output_key else p.key for p in panes]
        values = np.empty(len(panes), dtype=object)
        values[:] = [stage.output_value(p) if stage.output_value else p.value for p in panes]
        timestamps = np.array([p.timestamp for p in panes], dtype=np.int64)
        return RecordBatch(keys, timestamps, {None: values})


# ------------------------------------------------------------------ graphs of stages over named columns
PANE_ROW_COLUMNS = names(output.PANE_COLUMNS)
"""What a pane row holds besides its key and aggregate columns (times in ms; ``window_end`` exclusive): the pane
metadata of :mod:`floodmark.protocol.output`, which Spark's pane rows have too."""

EVENT_TIME = output.PANE_TIMESTAMP
"""A downstream stage's event time: the upstream pane's output timestamp."""

JOIN_TIME = "join_time"
"""A join stage's rows' event time (its spec's output time), what a downstream stage reads as event time."""

WINDOW_JOIN_COLUMNS = (output.WINDOW_START, output.WINDOW_END, output.TIMING, output.PANE_INDEX)
"""What a window join's rows say of the pane that paired them: its window (ms, end exclusive), timing (ON_TIME or
LATE) and index."""

OUTPUT_TIME = "output_time"
"""A process stage's rows' event time (the time each row was emitted at), what a downstream stage reads as event
time."""

UpstreamRows = Sequence[tuple[str, pd.DataFrame, str]]
"""A stage's input of one batch: ``(upstream name, its rows, their event-time column)`` per upstream that sent
rows, in the order they came."""


class StageKind(Protocol):
    """What every kind of stage in a graph says of itself, so that a runtime runs any kind with one loop (see
    :meth:`MicroBatchPipeline.run_batch`): its keyed operator, the rows that operator takes, the rows it gives.

    :ivar name: unique among the pipeline's sources and stages. :ivar upstream: the sources or stages it reads.
    :ivar output_event_time: the column of its output rows that a downstream stage reads as event time (ms).
    """

    name: str
    output_event_time: ClassVar[str]

    @property
    def upstream(self) -> tuple[str, ...]: ...

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns of its input rows that make a row's key (``()``: one key)."""
        ...

    def input_side(self, upstream: str) -> Side | None:
        """Which side of its input ``upstream``'s rows are (a join's two sides; None for a stage of one input)."""
        ...

    def operator(self, snapshot: bytes | None) -> KeyedOperator[Any, Any]:
        """A new operator (``snapshot`` None) or the one ``snapshot`` saved."""
        ...

    def operator_rows(self, parts: UpstreamRows) -> list[Any]:
        """The batch's rows as the operator's ``add`` takes them, in the order it takes them."""
        ...

    def output_rows(self, emitted: Any, input_columns: Mapping[str, Sequence[str]]) -> pd.DataFrame:
        """What ``emitted`` gives downstream, as rows of named columns.

        :arg input_columns: each upstream's columns as its rows have shown them (so a join's side without a row in
            this batch still has its columns).
        """
        ...

    def input_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The stage's input rows from an upstream's output rows."""
        ...

    def nothing_emitted(self) -> Any:
        """An empty output of this kind (what its operator's moves return)."""
        ...


class _OneInput:
    """What a stage of one input (its upstreams unioned) says of it: keyed by its ``key_by`` columns, no sides."""

    key_by: tuple[str, ...]

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.key_by

    def input_side(self, upstream: str) -> Side | None:
        return None


@dataclass(frozen=True)
class WindowedStage(_OneInput):
    """One windowed aggregation in a graph of stages, over named columns.

    :arg name: unique among the pipeline's sources and stages (outputs are filed under it).
    :arg upstream: the sources, or the stages, whose rows it reads (several: their rows are unioned, Beam's
        ``Flatten``). A stage reads sources or stages, not both.
    :arg spec: windowing and a named aggregate (``{"column": aggregates.mean("length")}``) over input columns.
    :arg key_by: key columns of the input rows; ``()`` aggregates globally (one key, Beam's ``Combine.globally``).
    :arg columns: columns derived from a stage's input rows before keying, ``{name: expression}``, evaluated
        with ``pandas.DataFrame.eval`` over the upstream pane rows (e.g. ``{"length": "window_end -
        window_start"}``). For stages that read sources, derive columns on the DataFrame instead.
    """

    name: str
    upstream: tuple[str, ...]
    spec: WindowSpec
    key_by: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    output_event_time: ClassVar[str] = EVENT_TIME

    def __post_init__(self) -> None:
        upstream = (self.upstream,) if isinstance(self.upstream, str) else tuple(self.upstream)
        key_by = (self.key_by,) if isinstance(self.key_by, str) else tuple(self.key_by)
        object.__setattr__(self, "upstream", upstream)
        object.__setattr__(self, "key_by", key_by)
        object.__setattr__(self, "columns", dict(self.columns))
        if not isinstance(self.spec.aggregate, Several):
            raise ValueError(f"stage {self.name!r}: the aggregate must be named, {{'column': aggregate, ...}}")

    @property
    def result_names(self) -> list[str]:
        assert isinstance(self.spec.aggregate, Several)
        return list(self.spec.aggregate.parts)

    def pane_columns(self) -> list[str]:
        """The columns of this stage's pane rows (what a downstream stage reads)."""
        return [*self.key_by, *PANE_ROW_COLUMNS, *self.result_names]

    def operator(self, snapshot: bytes | None) -> WindowOperator:
        return WindowOperator(self.spec) if snapshot is None else restore_operator(self.spec, snapshot)

    def operator_rows(self, parts: UpstreamRows) -> list[RecordBatch]:
        """The batch's rows of every upstream as one record batch (none without rows)."""
        if not parts:
            return []
        times = np.concatenate([f[ts].to_numpy(dtype=np.int64) for _, f, ts in parts])
        batch = frame_records(pd.concat([f for _, f, _ in parts], ignore_index=True), self.key_by, times, self.spec)
        return [] if batch is None else [batch]

    def output_rows(self, emitted: Emitted, input_columns: Mapping[str, Sequence[str]]) -> pd.DataFrame:
        return pane_rows(emitted, self.key_by, self.result_names)

    def input_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        return stage_input_rows(frame, self)

    def nothing_emitted(self) -> Emitted:
        return Emitted()


@dataclass(frozen=True)
class JoinStage:
    """An interval join of two upstreams in a graph of stages (:mod:`floodmark.core.join` over named columns).

    :arg name: unique among the pipeline's sources and stages.
    :arg left, right: the source or stage whose rows are the join's left and right input (two different ones).
    :arg on: key columns both sides have (``()``: every row has the one key).
    :arg spec: an interval join (:class:`~floodmark.core.join.IntervalJoinSpec`: bounds, kind, output time,
        allowed lateness) or a window join (:class:`~floodmark.core.join.WindowJoinSpec`: windows, allowed lateness).

    Output rows: the ``on`` columns, then every other column of the left row as ``left_<name>`` and of the right
    row as ``right_<name>`` (the side's columns are null in a row the join kept without a partner); for a window
    join, :data:`WINDOW_JOIN_COLUMNS` (the pair's window and the pane that emitted it); then :data:`JOIN_TIME`,
    the row's event time (ms).
    """

    name: str
    left: str
    right: str
    on: tuple[str, ...]
    spec: IntervalJoinSpec | WindowJoinSpec
    output_event_time: ClassVar[str] = JOIN_TIME

    def __post_init__(self) -> None:
        object.__setattr__(self, "on", (self.on,) if isinstance(self.on, str) else tuple(self.on))
        if self.left == self.right:
            raise ValueError(f"join stage {self.name!r}: left and right are both {self.left!r}")

    @property
    def upstream(self) -> tuple[str, ...]:
        return (self.left, self.right)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.on

    def side_of(self, upstream: str) -> Side:
        return Side.LEFT if upstream == self.left else Side.RIGHT

    def input_side(self, upstream: str) -> Side | None:
        return self.side_of(upstream)

    def operator(self, snapshot: bytes | None) -> JoinOperator:
        return join_operator(self.spec, snapshot)

    def operator_rows(self, parts: UpstreamRows) -> list[KeyedRows]:
        """The left rows, then the right rows (each side's upstreams in the order they came)."""
        return [
            KeyedRows(key_array(frame, self.on), frame[ts].tolist(), frame.to_dict("records"), side)
            for side in (Side.LEFT, Side.RIGHT)
            for upstream, frame, ts in parts
            if self.side_of(upstream) is side
        ]

    def output_rows(
        self, emitted: JoinEmitted | WindowJoinEmitted, input_columns: Mapping[str, Sequence[str]]
    ) -> pd.DataFrame:
        return self.rows(emitted.joined, {self.side_of(up): columns for up, columns in input_columns.items()})

    def input_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame

    def nothing_emitted(self) -> JoinEmitted | WindowJoinEmitted:
        return WindowJoinEmitted() if isinstance(self.spec, WindowJoinSpec) else JoinEmitted()

    def rows(
        self, joined: Sequence[JoinedRow | WindowJoinedRow], columns: Mapping[Side, Sequence[str]] | None = None
    ) -> pd.DataFrame:
        """The output rows of ``joined`` (see the class docstring).

        :arg columns: each side's input columns, so that a side without a row among ``joined`` still has its
            columns (null); None: the columns the rows have.
        """
        known = {side: [c for c in names if c not in self.on] for side, names in (columns or {}).items()}
        records = []
        for row in joined:
            key = row.key if len(self.on) != 1 else (row.key,)
            record = dict(zip(self.on, key if self.on else (), strict=True))
            for side, prefix, values in ((Side.LEFT, "left_", row.left), (Side.RIGHT, "right_", row.right)):
                if values is not None:
                    record.update({f"{prefix}{c}": v for c, v in values.items() if c not in self.on})
                else:
                    record.update({f"{prefix}{c}": None for c in known.get(side, ())})
            if isinstance(row, WindowJoinedRow):
                pane = (row.window.start, row.window.end, row.timing.value, row.pane_index)
                record.update(zip(WINDOW_JOIN_COLUMNS, pane, strict=True))
            record[JOIN_TIME] = row.timestamp
            records.append(record)
        return pd.DataFrame(records) if records else pd.DataFrame({c: [] for c in [*self.on, JOIN_TIME]})


@dataclass(frozen=True)
class ProcessStage(_OneInput):
    """A keyed process function in a graph of stages (:mod:`floodmark.core.process` over named columns).

    :arg name: unique among the pipeline's sources and stages. :arg upstream: the sources, or the stages, whose rows
        it reads (several: unioned). :arg key_by: key columns of the input rows (``()``: one key).
    :arg function: your :class:`~floodmark.core.process.function.KeyedProcessFunction`; each record it gets is its
        input row as a dict of the row's columns.
    :arg output: the columns of the rows it emits, ``{name: Spark type}`` (``{"alert": "string", "silent_ms":
        "long"}``); a row is a dict of them (a missing one is null) or a tuple in this order.

    Output rows: the key columns, the ``output`` columns, then :data:`OUTPUT_TIME` (the row's event time, ms).
    """

    name: str
    upstream: tuple[str, ...]
    key_by: tuple[str, ...]
    function: KeyedProcessFunction
    output: Mapping[str, str]
    output_event_time: ClassVar[str] = OUTPUT_TIME

    def __post_init__(self) -> None:
        upstream = (self.upstream,) if isinstance(self.upstream, str) else tuple(self.upstream)
        key_by = (self.key_by,) if isinstance(self.key_by, str) else tuple(self.key_by)
        object.__setattr__(self, "upstream", upstream)
        object.__setattr__(self, "key_by", key_by)
        object.__setattr__(self, "output", dict(self.output))
        if not isinstance(self.function, KeyedProcessFunction):
            raise TypeError(f"stage {self.name!r}: {self.function!r} is not a keyed process function")
        clash = sorted(set(self.output) & {*self.key_by, OUTPUT_TIME})
        if clash:
            raise ValueError(f"stage {self.name!r}: output columns {clash} clash with the keys or {OUTPUT_TIME!r}")

    def operator(self, snapshot: bytes | None) -> KeyedProcessOperator:
        if snapshot is None:
            return KeyedProcessOperator(self.function)
        return restore_process_operator(self.function, snapshot)

    def operator_rows(self, parts: UpstreamRows) -> list[KeyedRows]:
        """Each upstream's rows, in the order they came; a record is its row as a dict of the row's columns."""
        return [KeyedRows(key_array(f, self.key_by), f[ts].tolist(), f.to_dict("records")) for _, f, ts in parts]

    def output_rows(self, emitted: ProcessEmitted, input_columns: Mapping[str, Sequence[str]]) -> pd.DataFrame:
        return self.rows(emitted.rows)

    def input_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame

    def nothing_emitted(self) -> ProcessEmitted:
        return ProcessEmitted()

    def row_values(self, row: Any) -> tuple:
        """``row`` (a dict or a sequence) as a tuple of the ``output`` columns' values.

        :raises ValueError: a dict with columns the output lacks, or a sequence of another length.
        """
        names = list(self.output)
        if isinstance(row, Mapping):
            unknown = sorted(set(row) - set(names))
            if unknown:
                raise ValueError(f"the row has columns {unknown} its stage's output does not declare ({names})")
            return tuple(row.get(n) for n in names)
        if isinstance(row, tuple | list) and len(row) == len(names):
            return tuple(row)
        raise ValueError(f"a row is a dict of {names} or a tuple of {len(names)} values, not {row!r}")

    def rows(self, emitted: Sequence[ProcessOutput]) -> pd.DataFrame:
        """The output rows of ``emitted`` (see the class docstring); a row that does not fit is skipped (the
        runtimes make it a dead letter)."""
        records = []
        for out in emitted:
            try:
                values = self.row_values(out.row)
            except ValueError:
                continue
            key = out.key if len(self.key_by) != 1 else (out.key,)
            record = dict(zip(self.key_by, key if self.key_by else (), strict=True))
            record.update(zip(self.output, values, strict=True))
            record[OUTPUT_TIME] = out.timestamp
            records.append(record)
        columns = [*self.key_by, *self.output, OUTPUT_TIME]
        return pd.DataFrame(records, columns=columns)


def stage_named(stages: Sequence[str], name: str | None, owner: str, how: str = "(stage=...)") -> str:
    """``name``, one of ``stages``; None: the only stage.

    :arg owner: what has the stages, for the message (``"the query"``). :arg how: how to name one (``"(stage=...)"``).
    :raises ValueError: ``name`` is not one of ``stages``, or None with several.
    """
    if name is None:
        if len(stages) > 1:
            raise ValueError(f"{owner} has stages {', '.join(stages)}: say which one {how}")
        return stages[0]
    if name not in stages:
        raise ValueError(f"{owner} has no stage {name!r}; its stages: {', '.join(stages)}")
    return name


def pane_rows(emitted: Emitted, key_columns: Sequence[str], result_names: Sequence[str]) -> pd.DataFrame:
    """Every pane of ``emitted`` as a row: key columns, :data:`PANE_ROW_COLUMNS`, aggregate columns."""
    parts = []
    for frame in emitted.pane_frames:
        if len(frame):  # the pane frame's columns are the rows' (emitted.pane_frame)
            parts.append(frame[["key", *PANE_ROW_COLUMNS, *result_names]])
    if not parts:
        return pd.DataFrame({c: [] for c in [*key_columns, *PANE_ROW_COLUMNS, *result_names]})
    rows = pd.concat(parts, ignore_index=True)
    keys = rows.pop("key").tolist()
    if len(key_columns) == 1:
        rows.insert(0, key_columns[0], keys)
    elif key_columns:
        for i, name in enumerate(key_columns):
            rows.insert(i, name, [k[i] for k in keys])
    return rows


def stage_input_rows(pane_frame: pd.DataFrame, stage: WindowedStage) -> pd.DataFrame:
    """``stage``'s input rows from its upstream's pane rows: the rows plus the stage's derived ``columns``."""
    if not stage.columns:
        return pane_frame
    rows = pane_frame.copy()
    for name, expression in stage.columns.items():
        try:
            rows[name] = rows.eval(expression) if len(rows) else pd.Series([], dtype=np.float64)
        except Exception as error:
            raise ValueError(f"stage {stage.name!r}: column {name!r} = {expression!r} failed: {error}") from error
    return rows


def key_array(frame: pd.DataFrame, key_columns: Sequence[str]) -> np.ndarray:
    """One key per row: the column's value for one key column, a tuple for several, ``None`` for none."""
    keys = np.empty(len(frame), dtype=object)
    if len(key_columns) == 1:
        return frame[key_columns[0]].to_numpy(dtype=object)
    if key_columns:
        keys[:] = list(zip(*(frame[c].tolist() for c in key_columns), strict=True))
    return keys


def frame_records(
    frame: pd.DataFrame, key_columns: Sequence[str], event_time: str | np.ndarray, spec: WindowSpec
) -> RecordBatch | None:
    """Rows of named columns as the operator's records; the payload is each row's position in ``frame``.

    :arg event_time: the column of event times (ms), or the event times themselves.

    Numeric aggregate inputs of a numeric dtype travel as float64 (the core validates the rest, text
    included, with the combiner's rule).
    """
    if not len(frame):
        return None
    positions = np.arange(len(frame))
    columns: dict[str | None, np.ndarray] = {None: positions}
    numeric = set(spec.aggregate.numeric_fields)
    for name in spec.aggregate.fields:
        if name is not None and name not in columns:
            column = frame[name]
            columns[name] = (
                column.to_numpy(dtype=np.float64, na_value=np.nan)
                if name in numeric and pd.api.types.is_numeric_dtype(column.dtype)
                else column.to_numpy(dtype=object)
            )
    timestamps = frame[event_time].to_numpy(dtype=np.int64) if isinstance(event_time, str) else event_time
    return RecordBatch(key_array(frame, key_columns), timestamps, columns, payload=positions)


def _objects(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


class MicroBatchPipeline:
    """A graph of sources and stages run one micro-batch at a time: the reference of the Spark runtime.

    Every :meth:`run_batch` runs each stage once, upstream first, at the input watermark
    :class:`~floodmark.core.watermarks.graph.StageGraph` gave it, with its upstreams' rows of this batch
    (records of the sources, panes of the stages); :meth:`end_batch` then advances the graph with the
    sources' watermarks for the next batch and the stages' holds.

    :arg sources: ``{source name: its event-time column (ms)}``.
    :arg stages: the stages, in any order.
    """

    def __init__(self, sources: Mapping[str, str], stages: Sequence[StageKind]) -> None:
        self.sources = dict(sources)
        self.stages = {stage.name: stage for stage in stages}
        self.graph = StageGraph(list(sources), {s.name: s.upstream for s in stages})
        self.snapshots: dict[str, bytes | None] = {name: None for name in self.stages}
        self.gauges: dict[str, OperatorGauges] = {}
        """Each stage's operator gauges after its latest batch."""
        self.results = {s.name: StageResult(s.nothing_emitted()) for s in stages}
        self.input_columns: dict[str, dict[str, list[str]]] = {name: {} for name in self.stages}
        """Each stage's upstreams' columns, as their rows have shown them."""

    @property
    def holds(self) -> dict[str, int | None]:
        """Each stage's hold after its latest batch (what :meth:`end_batch` holds its output watermark below)."""
        return {name: gauges.hold for name, gauges in self.gauges.items()}

    def run_batch(self, inputs: Mapping[str, pd.DataFrame], processing_time: int) -> dict[str, StageEmitted]:
        """One micro-batch: ``inputs`` are each source's records of the batch (missing: none).

        Every stage, upstream first, runs its operator the one way every kind runs
        (:mod:`floodmark.core.keyed_operator`): processing time, then its input watermark of the batch, then its
        rows of the batch; what it emits becomes its downstream stages' rows of the same batch.
        """
        watermarks = self.graph.input_watermarks()
        rows: dict[str, list[tuple[str, pd.DataFrame, str]]] = {name: [] for name in self.stages}
        for source, frame in inputs.items():
            for stage in self.graph.downstream(source):
                rows[stage].append((source, frame, self.sources[source]))
        out: dict[str, StageEmitted] = {}
        for name in self.graph.order:
            stage = self.stages[name]
            for upstream, frame, _ in rows[name]:
                self.input_columns[name][upstream] = list(frame.columns)
            operator = stage.operator(self.snapshots[name])
            emitted = operator.advance_processing_time(processing_time)
            emitted.extend(operator.advance_watermark(watermarks[name]))
            for taken in stage.operator_rows([(up, f, ts) for up, f, ts in rows[name] if len(f)]):
                emitted.extend(operator.add(taken))
            self.snapshots[name] = operator.snapshot()
            self.gauges[name] = operator.gauges()
            self.results[name].emitted.extend(emitted)
            out[name] = emitted
            produced = stage.output_rows(emitted, self.input_columns[name])
            for d in self.graph.downstream(name):
                rows[d].append((name, self.stages[d].input_rows(produced), stage.output_event_time))
        return out

    def rows_of(self, name: str, emitted: StageEmitted) -> pd.DataFrame:
        """What stage ``name`` gives downstream for ``emitted``, as rows of named columns."""
        return self.stages[name].output_rows(emitted, self.input_columns[name])

    def stage_times(self, name: str, now: int) -> StageTimes:
        """Stage ``name``'s watermarks and lags at processing time ``now`` (after :meth:`end_batch`)."""
        gauges = self.gauges.get(name)
        return self.graph.watermarks[name].times(now, gauges.oldest_pending if gauges else None)

    def end_batch(self, sources: Mapping[str, tuple[int, bool]], processing_time: int = 0) -> dict[str, int]:
        """Advance the graph: ``sources`` = ``{source: (watermark for the next batch, idle)}``."""
        watermarks = self.graph.advance(sources, self.holds)
        for name, result in self.results.items():
            marks = self.graph.watermarks[name]
            result.watermarks.append((processing_time, marks.input_watermark, marks.output_watermark))
        return watermarks
