"""What the Spark runtime needs to know about a stage, in three picklable parts by what they describe.

* :class:`StageSemantics`: what the stage computes and emits (spec, keys, result types); it fixes the output
  schema (one wide schema whose ``fm_kind`` column says which kind of row it is: PANE, LATE, BAD, STATS,
  GAUGE) and the combiner's columns, both the Spark form (:func:`spark_fields`) of what
  :mod:`floodmark.protocol` declares. The sink needs this part only.
* :class:`InputBinding`: how one input's rows feed the stage (event-time, split, corrupt-record and text
  columns, what a dead letter's ``record`` is made of); the map side of each source has its own.
* :class:`StateLayout`: the buckets and the state format, fixed when the checkpoint is created.

:class:`RuntimePlan` holds the three: built on the driver in one call (:meth:`RuntimePlan.for_input`, which
refuses definitions the input cannot run: missing or nested columns, clashing names) once the checkpoint's
layout is known, and shipped to the executors inside the combiner and the stateful processor. A single
aggregation is a query of one stage.

Between the map-side combiner and the stateful processor, rows are the input
rows plus combiner columns (:meth:`StageSemantics.combiner_fields`); ``fm_row`` says
what a row is (:mod:`floodmark.protocol.wire`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    _parse_datatype_string,
)

from floodmark.core import aggregates
from floodmark.core.combine import accumulator_layout
from floodmark.core.join import WindowJoinSpec
from floodmark.core.join.spec import IntervalJoinSpec, Side
from floodmark.core.spec import WindowSpec
from floodmark.protocol import output, wire
from floodmark.protocol.columns import BINARY, BOOL, DOUBLE, INT, LONG, STRING, Column, names, typed

# The row kinds and combiner columns under the names this module gave them before floodmark.protocol declared them.
from floodmark.protocol.wire import (  # noqa: F401
    BAD,
    BAD_INPUT,
    BUCKET,
    COUNT,
    GAUGE,
    HOLD,
    LATE,
    MAX_TS,
    MIN_TS,
    PANE,
    PARTIAL,
    RAW,
    REASON,
    RECORD,
    ROW,
    SPLIT,
    SPLIT_STATS,
    STATS,
    WINDOW_END,
    WINDOW_START,
)


def sql_name(name: str) -> str:
    """Column ``name`` as a SQL identifier (back-quoted, so any name works in SQL text)."""
    return "`" + name.replace("`", "``") + "`"


# Input columns the runtime adds before the combiner (prefixed so that they never clash with user columns).
TS = "fm_ts"
TS_RAW = "fm_ts_raw"
TS_ERROR = "fm_ts_error"
"""Why the event-time expression failed on a row (null where it did not):
:func:`floodmark.spark.sources.inputs.event_time_ms`."""
SPLIT_VALUE = "fm_split_value"

TEXT = "fm_text"
"""The input column that keeps each row's original text (:func:`floodmark.spark.read_json_lines`,
:func:`floodmark.spark.read_kafka`): a dead letter's ``record`` is that text, not the parsed columns
written back as JSON. The only ``fm_`` column an input may have."""

SPARK_TYPES: dict[str, DataType] = {
    LONG: LongType(),
    INT: IntegerType(),
    DOUBLE: DoubleType(),
    STRING: StringType(),
    BOOL: BooleanType(),
    BINARY: BinaryType(),
}
"""Each neutral column type (:mod:`floodmark.protocol.columns`) as Spark's."""


def spark_fields(columns: Iterable[Column]) -> list[StructField]:
    """``columns`` (:mod:`floodmark.protocol`) as Spark fields, in order."""
    return [StructField(column.name, SPARK_TYPES[column.type]) for column in columns]


STATE_VALUE_BYTES = 16 * 1024 * 1024
"""The largest value of a bucket's state in format 2 (:mod:`floodmark.spark.stateful.bucket_state`): far below the JVM's
1 GiB array limit, large enough that a part is rarely cut."""

PANE_META = spark_fields(output.PANE_COLUMNS)
RECORD_META = spark_fields(output.RECORD_COLUMNS)
STATS_META = spark_fields(wire.REPORT_COLUMNS)
"""The STATS and GAUGE rows' columns."""


def corrupt_record_column(spark) -> str:
    """The name ``spark`` (a SparkSession) gives the column that keeps an unparsable line's text
    (``spark.sql.columnNameOfCorruptRecord``, ``_corrupt_record`` by default)."""
    return spark.conf.get("spark.sql.columnNameOfCorruptRecord", "_corrupt_record") or "_corrupt_record"


def check_columns(
    columns: Sequence[str], key_columns: Sequence[str] = (), event_time: str | None = None, split: str | None = None
) -> None:
    """A ``ValueError`` naming the first of a definition's columns that the input (its ``columns``) lacks, and
    the columns it has. ``None``: not a column name (an expression, or no split)."""
    missing = [c for c in key_columns if c not in columns]
    if missing:
        raise ValueError(f"key columns {missing} are not in the input {list(columns)}: use the input's column names")
    for role, name in (("event-time", event_time), ("split", split)):
        if name is not None and name not in columns:
            raise ValueError(
                f"{role} column {name!r} is not in the input {list(columns)}: use one of its columns or a Column "
                "expression"
            )


def check_atomic(schema: StructType, grouped: Sequence[str]) -> None:
    """A ``ValueError`` naming the key and split columns (``grouped``) of ``schema`` that are not of atomic types."""
    nested = [
        f"{f.name} ({f.dataType.simpleString()})"
        for f in schema.fields
        if f.name in grouped and isinstance(f.dataType, ArrayType | MapType | StructType)
    ]
    if nested:
        raise ValueError(f"key and split columns must be of atomic types (they are grouped on), not {nested}")


_RESULT_TYPES = {"int": LongType(), "float": DoubleType()}


def result_type(aggregate: aggregates.Aggregate, input_types: dict[str, DataType]) -> DataType:
    """The Spark type of an aggregate's result column (from its ``result_kind``; anything else: JSON text)."""
    if aggregate.result_kind == "list":
        return ArrayType(input_types.get(aggregate.field or "", StringType()))
    return _RESULT_TYPES.get(aggregate.result_kind, StringType())


@dataclass(frozen=True)
class StageSemantics:
    """What a stage computes and emits, whatever feeds it and however its state is laid out.

    :ivar name: the stage's name in its query's graph (its watermark is the control entry's ``stage_watermarks``
        of that name). :ivar spec: the window spec (the aggregate is always ``Several``: one column per name).
    :ivar key_columns: user key columns, in order. :ivar key_types: their Spark types.
    :ivar result_types: each aggregate's output column and its Spark type (:func:`result_type`).
    :ivar numeric_fields: the input columns a numeric aggregate reads.
    """

    name: str
    spec: WindowSpec
    key_columns: tuple[str, ...]
    key_types: tuple[DataType, ...]
    result_types: tuple[tuple[str, DataType], ...]
    numeric_fields: tuple[str, ...]

    @property
    def combines(self) -> bool:
        """Whether records are aggregated before the shuffle (most of the columnar policy's specs)."""
        return self.spec.combines_records

    def accumulator_columns(self) -> list[tuple[str, Column]]:
        """``(core accumulator, column)`` for the PARTIAL rows' accumulators (a long or a double each)."""
        if not self.combines:
            return []
        return [
            (name, Column(wire.accumulator(i), LONG if np.dtype(dtype).kind == "i" else DOUBLE))
            for i, (name, dtype) in enumerate(accumulator_layout(self.spec))
        ]

    def combiner_fields(self) -> list[StructField]:
        """The columns the combiner adds to the input rows."""
        accumulators = [column for _, column in self.accumulator_columns()]
        return spark_fields([*wire.COMBINER_COLUMNS, *accumulators, *wire.REJECTED_COLUMNS])

    @property
    def result_names(self) -> list[str]:
        return [name for name, _ in self.result_types]

    def emitted_schema(self) -> StructType:
        """What the stage emits, one row per pane, late record or dead letter (``fm_kind``: PANE, LATE, BAD)."""
        fields = spark_fields(typed(wire.TYPES, [wire.KIND]))
        fields += [StructField(name, dtype) for name, dtype in zip(self.key_columns, self.key_types, strict=True)]
        fields += PANE_META
        fields += [StructField(name, dtype) for name, dtype in self.result_types]
        fields += RECORD_META
        return StructType(fields)

    def output_schema(self) -> StructType:
        """Every row a bucket returns: :meth:`emitted_schema` plus the STATS and GAUGE columns."""
        return StructType([*self.emitted_schema().fields, *STATS_META])

    def pane_columns(self) -> list[str]:
        return [*self.key_columns, *names(output.PANE_COLUMNS), *self.result_names]

    def record_columns(self) -> list[str]:
        return [*self.key_columns, *names(output.LATE_COLUMNS)]

    def dead_letter_columns(self) -> list[str]:
        return [*self.key_columns, *names(output.DEAD_LETTER_COLUMNS)]


JOIN_TIME = "join_time"
"""A join stage's rows' event time in ms (``floodmark.core.pipeline.JOIN_TIME``)."""
OUTPUT_TIME = "output_time"
"""A process stage's rows' event time in ms (``floodmark.core.pipeline.OUTPUT_TIME``)."""


class RowStageSemantics:
    """What a stage that emits rows of its own emits (a join's joined rows, a process function's rows), in the
    shape a window stage's :class:`StageSemantics` has: its rows where a window stage has panes (``fm_kind``
    PANE), late rows (:attr:`late_columns` after the keys), dead letters. A subclass gives ``name``,
    ``key_columns``, ``key_types`` and ``result_types`` (its rows' columns after the keys)."""

    name: str
    key_columns: tuple[str, ...]
    key_types: tuple[DataType, ...]
    combines = False
    """Records are shipped, not partials."""
    numeric_fields: tuple[str, ...] = ()
    late_columns: tuple[Column, ...] = output.RECORD_COLUMNS
    """The late rows' columns after the keys."""

    @property
    def result_types(self) -> tuple[tuple[str, DataType], ...]:
        raise NotImplementedError

    @property
    def result_names(self) -> list[str]:
        return [name for name, _ in self.result_types]

    def combiner_fields(self) -> list[StructField]:
        return spark_fields([*wire.COMBINER_COLUMNS, *wire.REJECTED_COLUMNS])

    def emitted_schema(self) -> StructType:
        """Rows, late rows and dead letters in one row form (``fm_kind``: PANE, LATE, BAD)."""
        fields = spark_fields(typed(wire.TYPES, [wire.KIND]))
        fields += [StructField(name, dtype) for name, dtype in zip(self.key_columns, self.key_types, strict=True)]
        fields += [StructField(name, dtype) for name, dtype in self.result_types]
        fields += spark_fields([c for c in self.late_columns if c not in output.RECORD_COLUMNS])
        fields += RECORD_META
        return StructType(fields)

    def output_schema(self) -> StructType:
        return StructType([*self.emitted_schema().fields, *STATS_META])

    def pane_columns(self) -> list[str]:
        return [*self.key_columns, *self.result_names]

    def record_columns(self) -> list[str]:
        return [*self.key_columns, *names(self.late_columns)]

    def dead_letter_columns(self) -> list[str]:
        return [*self.key_columns, *names(output.DEAD_LETTER_COLUMNS)]

    def check_names(self, what: str, own: Sequence[str] = ()) -> None:
        """A ``ValueError`` naming the output columns that clash with each other or with floodmark's (but the
        stage's ``own`` metadata columns)."""
        outputs = [*self.pane_columns(), *names(self.late_columns)]
        taken = sorted(
            {n for n in self.pane_columns() if (n in output.RESERVED and n not in own) or outputs.count(n) > 1}
        )
        if taken:
            raise ValueError(f"{what} {self.name!r}: output column name(s) {taken} clash: rename them")


@dataclass(frozen=True)
class JoinSemantics(RowStageSemantics):
    """What a join stage emits: joined rows, late rows with their side, dead letters.

    :ivar name: the stage's name. :ivar spec: the interval join. :ivar key_columns: the ``on`` columns.
    :ivar key_types: their Spark types. :ivar sides: each side's value columns (every user column of its input
        but the keys) and their types, left then right.
    """

    name: str
    spec: IntervalJoinSpec | WindowJoinSpec
    key_columns: tuple[str, ...]
    key_types: tuple[DataType, ...]
    sides: tuple[tuple[tuple[str, DataType], ...], tuple[tuple[str, DataType], ...]]
    late_columns: tuple[Column, ...] = output.JOIN_LATE_COLUMNS

    @classmethod
    def of(
        cls,
        name: str,
        spec: IntervalJoinSpec | WindowJoinSpec,
        on: Sequence[str],
        left: StructType,
        right: StructType,
        inputs: tuple[InputBinding, InputBinding] | None = None,
    ) -> JoinSemantics:
        """The semantics of joining inputs of schemas ``left`` and ``right`` on ``on``; a ``ValueError`` names what
        cannot run (a key column missing or of different types on the two sides: their rows would land in
        different buckets; output names that clash).

        :arg inputs: how each side's rows feed the stage: a side's values are its binding's ``user_columns`` but
            the keys (not Spark's corrupt-record column nor the original text). None: bindings of the schemas
            without a corrupt-record column."""
        types = {
            side: {f.name: f.dataType for f in schema.fields}
            for side, schema in ((Side.LEFT, left), (Side.RIGHT, right))
        }
        for schema in (left, right):
            check_columns(schema.names, on)
            check_atomic(schema, on)
        differ = [
            f"{c} ({types[Side.LEFT][c].simpleString()} / {types[Side.RIGHT][c].simpleString()})"
            for c in on
            if types[Side.LEFT][c] != types[Side.RIGHT][c]
        ]
        if differ:
            raise ValueError(
                f"join stage {name!r}: the key columns must have one type on both sides, not {differ}: cast one side"
            )
        if inputs is None:
            inputs = (InputBinding.of(left, None, None, False, None), InputBinding.of(right, None, None, False, None))
        values = tuple(
            tuple((c, types[side][c]) for c in binding.user_columns if c not in on)
            for side, binding in zip((Side.LEFT, Side.RIGHT), inputs, strict=True)
        )
        semantics = cls(
            name=name,
            spec=spec,
            key_columns=tuple(on),
            key_types=tuple(types[Side.LEFT][c] for c in on),
            sides=values,  # type: ignore[arg-type]
        )
        semantics.check_names("join stage", [name for name, _ in semantics.window_columns])
        return semantics

    @property
    def window_columns(self) -> tuple[tuple[str, DataType], ...]:
        """A window join's rows' pane columns (``floodmark.core.pipeline.WINDOW_JOIN_COLUMNS``); none for an
        interval join."""
        if not isinstance(self.spec, WindowJoinSpec):
            return ()
        return tuple(
            (name, SPARK_TYPES[output.TYPES[name]])
            for name in (output.WINDOW_START, output.WINDOW_END, output.TIMING, output.PANE_INDEX)
        )

    @property
    def result_types(self) -> tuple[tuple[str, DataType], ...]:
        """The joined rows' columns after the keys: ``left_<name>``, ``right_<name>``, a window join's
        :attr:`window_columns`, :data:`JOIN_TIME`."""
        prefixed = [
            (f"{prefix}{name}", dtype)
            for prefix, columns in zip(("left_", "right_"), self.sides, strict=True)
            for name, dtype in columns
        ]
        return (*prefixed, *self.window_columns, (JOIN_TIME, LongType()))

    def value_columns(self, side: Side) -> list[str]:
        """``side``'s value columns (unprefixed)."""
        return [name for name, _ in self.sides[0 if side is Side.LEFT else 1]]


@dataclass(frozen=True)
class ProcessSemantics(RowStageSemantics):
    """What a process stage emits: your function's rows (its declared output columns), dead letters (bad input,
    calls that raised, rows that do not fit the output); no late rows (your function decides what late means).

    :ivar output: the rows' columns after the keys and their Spark types.
    """

    name: str
    key_columns: tuple[str, ...]
    key_types: tuple[DataType, ...]
    output: tuple[tuple[str, DataType], ...]

    @classmethod
    def of(
        cls, name: str, key_by: Sequence[str], schema: StructType, output_types: Mapping[str, str]
    ) -> ProcessSemantics:
        """The semantics of a process stage keyed by ``key_by`` over input rows of ``schema`` emitting
        ``output_types`` (``{column: Spark type name}``); a ``ValueError`` names what cannot run."""
        check_columns(schema.names, key_by)
        check_atomic(schema, key_by)
        types = {f.name: f.dataType for f in schema.fields}
        declared = []
        for column, type_name in output_types.items():
            try:
                declared.append((column, _parse_datatype_string(type_name)))
            except Exception as error:
                raise ValueError(
                    f"process stage {name!r}: output column {column!r} has no Spark type {type_name!r}"
                ) from error
        semantics = cls(
            name=name, key_columns=tuple(key_by), key_types=tuple(types[c] for c in key_by), output=tuple(declared)
        )
        semantics.check_names("process stage")
        return semantics

    @property
    def result_types(self) -> tuple[tuple[str, DataType], ...]:
        """Your rows' columns after the keys, then :data:`OUTPUT_TIME`."""
        return (*self.output, (OUTPUT_TIME, LongType()))


@dataclass(frozen=True)
class InputBinding:
    """How the rows of one input (a source, or the upstream stages' panes) feed a stage: which column is event
    time, which is the split, which keep the original text, and what a dead letter's ``record`` is made of.

    :ivar user_columns: every user column (serialised into ``record`` for late/bad rows), but the corrupt-record
        and original-text columns.
    :ivar max_future_skew_ms: records more than this ahead of processing time are bad (None: no check).
    """

    user_columns: tuple[str, ...]
    max_future_skew_ms: int | None = None
    integral_columns: tuple[str, ...] = ()
    """User columns of integral Spark type (pandas turns them into floats when nulls are present)."""
    ts_column: str = TS
    """The column holding event time in ms: the user's own when it already is one (no copy is shipped)."""
    split_column: str | None = None
    """The input column holding each record's split, any type (labelled ``str(value)``, null as ``""``);
    ``None``: the whole input is split ``"0"``."""
    corrupt_column: str | None = None
    """Spark's corrupt-record column (``spark.sql.columnNameOfCorruptRecord``) when the input has it: a row
    whose text could not be parsed carries that text there and goes to the dead letters with it."""
    text_column: str | None = None
    """:data:`TEXT` when the input has it (a string column): every row's original text, the ``record`` of its
    dead letter whatever made it bad. Only the combiner reads it: records cross the shuffle without it."""
    source: str | None = None
    """The source a combiner reads when the graph has several: its split labels become ``"<source>/<split>"``
    (``floodmark.driver.controller.Controller.split_label``)."""
    split_stats: bool = True
    """Whether the combiner reports its splits' statistics (a source read by several stages reports once)."""
    side: Side | None = None
    """The join side these rows are (a join stage's input: the combiner tags its blocks with it,
    :func:`floodmark.spark.blocks.pack`); None for a window stage's input."""

    @classmethod
    def of(
        cls,
        schema: StructType,
        event_time: str | None,
        split: str | None,
        split_is_expression: bool,
        max_future_skew_ms: int | None,
        corrupt_column: str | None = None,
        source: str | None = None,
        split_stats: bool = True,
        side: Side | None = None,
    ) -> InputBinding:
        """The binding of an input of ``schema`` (arguments as :meth:`RuntimePlan.for_input`'s); a ``ValueError``
        names input columns that start with ``fm_``."""
        columns = schema.names
        types = {f.name: f.dataType for f in schema.fields}
        text = TEXT if isinstance(types.get(TEXT), StringType) else None
        clashes = [c for c in columns if c.startswith("fm_") and c != text]
        if clashes:
            raise ValueError(f"input columns must not start with 'fm_' (reserved for floodmark): {clashes}")
        integral = (LongType, IntegerType, ShortType)
        corrupt = corrupt_column if isinstance(types.get(corrupt_column or ""), StringType) else None
        return cls(
            user_columns=tuple(c for c in columns if c not in (corrupt, text)),
            max_future_skew_ms=max_future_skew_ms,
            integral_columns=tuple(f.name for f in schema.fields if isinstance(f.dataType, integral)),
            ts_column=event_time if event_time is not None and isinstance(types.get(event_time), LongType) else TS,
            split_column=split if split is not None else SPLIT_VALUE if split_is_expression else None,
            corrupt_column=corrupt,
            text_column=text,
            source=source,
            split_stats=split_stats,
            side=side,
        )


@dataclass(frozen=True)
class StateLayout:
    """How a stage's state is laid out in the checkpoint: fixed when the checkpoint is created.

    :ivar buckets: number of state buckets. :ivar state_format: the checkpoint's state format
        (:func:`floodmark.spark.driver.checkpoint_records.check_state_format`): how the stage's buckets are stored
        (:mod:`floodmark.spark.stateful.bucket_state`).
    """

    buckets: int = 1
    bucket_labels: tuple[int, ...] = ()
    """The ``fm_bucket`` value of bucket 0..buckets-1, fixed with the checkpoint so that the buckets spread
    evenly over Spark's partitions (:mod:`floodmark.spark.stateful.bucket_layout`); empty: 0..buckets-1."""
    state_format: int = 1
    state_value_bytes: int = field(default_factory=lambda: STATE_VALUE_BYTES)
    """The largest value a bucket's state is stored in (format 2 cuts larger parts into chunks of this size)."""

    @property
    def bucket_values(self) -> tuple[int, ...]:
        """The ``fm_bucket`` value of bucket 0..buckets-1."""
        return self.bucket_labels or tuple(range(self.buckets))


@dataclass(frozen=True)
class RuntimePlan:
    """Everything the executors' map side and stateful processor agree on for one stage and one input: what
    the stage computes (``stage``), how the input's rows feed it (``input``), and how its state is laid out
    (``state``). The sink needs the first only."""

    stage: StageSemantics | JoinSemantics | ProcessSemantics
    input: InputBinding
    state: StateLayout = field(default_factory=StateLayout)
    right_input: InputBinding | None = None
    """A join stage's right input (``input`` is its left); None for a window stage."""
    spark_hash_types: tuple[str, ...] = ()
    """For a stage that reads sources and stages: the Spark types of its key columns (``simpleString``), by which
    the panes forwarded to it are bucketed as Spark buckets its sources' rows (``functions.hash``,
    :func:`~floodmark.spark.stateful.spark_hash.spark_hash`), so that a key's rows of both meet in one bucket.
    Empty: forwarded panes are bucketed by pandas' hash (every input a stage)."""

    def side_input(self, side: Side) -> InputBinding:
        """A join stage's input binding of ``side``."""
        binding = self.input if side is Side.LEFT else self.right_input
        assert binding is not None, "a join stage's plan has both sides' inputs"
        return binding

    @classmethod
    def for_input(
        cls,
        spec: WindowSpec,
        schema: StructType,
        key_columns: Sequence[str],
        event_time: str | None,
        split: str | None,
        split_is_expression: bool,
        max_future_skew_ms: int | None,
        corrupt_column: str | None = None,
        stage: str = "",
        state: StateLayout | None = None,
        source: str | None = None,
        split_stats: bool = True,
    ) -> RuntimePlan:
        """The plan of ``spec`` keyed by ``key_columns`` over an input of ``schema``; a ``ValueError`` names what
        the input cannot run (missing or nested columns, clashing names, columns named ``fm_...``).

        :arg event_time: the event-time column's name (``None``: an expression, computed into ``fm_ts``).
        :arg split: the split column's name (``None``: one split, or an expression when ``split_is_expression``).
        :arg corrupt_column: the name Spark gives the corrupt-record column; used when the input has a string
            column of that name (JSON and CSV readers with a schema that includes it, :func:`read_kafka`).
        :arg stage: the stage's name. :arg state: the stage's state layout (default: one bucket, format 1).
        :arg source, split_stats: see :class:`InputBinding` (a combiner's plan, one per source it reads).
        """
        columns = schema.names
        types = {f.name: f.dataType for f in schema.fields}
        check_columns(columns, key_columns, event_time, split)
        check_atomic(schema, [*key_columns, *([split] if split is not None else [])])
        if not isinstance(spec.aggregate, aggregates.Several):
            raise ValueError("on Spark the aggregate must be named: aggregate={'column': aggregates.count(), ...}")
        named = spec.aggregate.parts
        for name, aggregate in named.items():
            if aggregate.field is not None and aggregate.field not in columns:
                raise ValueError(f"aggregation {name!r} reads {aggregate.field!r}, which the input does not have")
        outputs = [*key_columns, *named]
        taken = sorted({n for n in outputs if n in output.RESERVED or outputs.count(n) > 1})
        if taken:
            raise ValueError(
                f"output column name(s) {taken} clash: key and aggregation names must be distinct and not one of "
                f"{sorted(output.RESERVED)}"
            )
        semantics = StageSemantics(
            name=stage,
            spec=spec,
            key_columns=tuple(key_columns),
            key_types=tuple(types[c] for c in key_columns),
            result_types=tuple((name, result_type(a, types)) for name, a in named.items()),
            numeric_fields=tuple(sorted({a.field for a in named.values() if a.numeric_input and a.field})),
        )
        binding = InputBinding.of(
            schema, event_time, split, split_is_expression, max_future_skew_ms, corrupt_column, source, split_stats
        )
        return cls(semantics, binding, state or StateLayout())
