"""Where panes, late records and dead letters go: files, tables, Kafka topics or your own function.

Every micro-batch hands each kind's rows to its :class:`Sink` with the batch id. Spark replays a batch
that did not commit (a crash, a kill), so a sink sees batch N again after a restart; what that means for
duplicates depends on the sink, and each states it in ``guarantee``:

* :class:`FileSink`: exactly-once. One directory per batch (``batch_id=N``), overwritten on replay.
* :class:`TableSink`: exactly-once. A table partitioned by ``batch_id``; a replay overwrites its partition.
* :class:`KafkaSink` with a ``transactional_id_prefix``: exactly-once for consumers that read
  ``read_committed``. Each batch's messages go out in one Kafka transaction that also commits the batch id;
  a replay of a committed batch writes nothing.
* :class:`KafkaSink` without one: at-least-once. A replay produces its records again; drop repeats by the
  dedupe key ``(key, window_start, window_end, pane_index)`` (also in each pane message's ``floodmark-pane-id``
  header), keeping the last message of a key: the committed attempt's (a key's messages share a partition, in
  order).
* :class:`DiscardSink`: panes not written at all (an intermediate stage whose panes only its downstream
  stages need); late records and dead letters cannot be discarded.
* :class:`FunctionSink`: yours. Your function gets ``(DataFrame, batch_id)``; make it idempotent per batch
  id for exactly-once.

A replayed batch reads the same offsets with the same watermark and state, so it emits the same panes;
only what an early count trigger puts in a speculative pane can differ, as records of one batch may reach
the operator in another order. Hence "keep the last". :meth:`Outputs.files` is the default layout:
``<root>/panes``, ``<root>/late``, ``<root>/dead_letter`` in Parquet.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from floodmark.driver import checkpoint_files
from floodmark.jvm import missing_data_source
from floodmark.protocol.output import BATCH_ID, PANE_INDEX, WINDOW_END, WINDOW_START
from floodmark.spark.connect import client_path, connect_path_problem, is_connect
from floodmark.spark.hadoop_files import session_files
from floodmark.spark.plan import sql_name

PANES, LATE, DEAD_LETTER = "panes", "late", "dead_letter"
KINDS = (PANES, LATE, DEAD_LETTER)

PANE_ID_HEADER = "floodmark-pane-id"
BATCH_ID_HEADER = "floodmark-batch-id"


@dataclass(frozen=True)
class OutputBatch:
    """One kind's rows of one micro-batch, as a sink receives them.

    :ivar kind: ``panes``, ``late`` or ``dead_letter``.
    :ivar key_columns: the pipeline's key columns. :ivar value_columns: its aggregation columns (panes).
    :ivar stage: the stage whose output this is (its name in the query's graph).
    :ivar query_id: Spark's id of the streaming query ("" when not known): an exactly-once Kafka sink's marker
        names it, so that another query's batches are not taken for this one's.
    """

    kind: str
    rows: DataFrame
    batch_id: int
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...] = ()
    stage: str = ""
    query_id: str = ""


class Sink(ABC):
    """Where one kind of output goes (see the module docstring for the guarantees)."""

    guarantee: ClassVar[str]
    discards: ClassVar[bool] = False
    """Nothing is written (:class:`DiscardSink`): the batch skips this output altogether."""
    runs_the_batch: ClassVar[bool] = False
    """``write`` runs the rows' own query plan and so reports the batch's ``DataFrame.observe`` metrics: the
    pane write can then be the job that runs the whole micro-batch (no extra job). Not so for a function, which
    may run no Spark action, nor for exactly-once Kafka, which reads the rows partition by partition on the
    driver: the batch then runs first as a no-op write, and their write reads the cached batch."""
    runs_your_code: ClassVar[bool] = False
    """``write`` hands the rows to your code, which may run Python steps of its own on them
    (:mod:`floodmark.spark.driver.arrow_batches` cannot know what they read)."""

    @abstractmethod
    def write(self, batch: OutputBatch) -> None:
        """Write ``batch.rows``; called once per attempt of a batch (a replay calls it again)."""

    def discard_empty(self, spark: SparkSession, kind: str, batch_id: int) -> None:  # noqa: B027 - optional hook
        """Remove what a write of no rows left behind (an empty directory); nothing by default."""

    def discard_after(self, spark: SparkSession, kind: str, batch_id: int) -> None:  # noqa: B027 - optional hook
        """Remove what batches after ``batch_id`` wrote: a stopped query interrupted them and never replays
        them (they had nothing to emit: they ran after the final flush). Nothing by default."""


@dataclass
class FileSink(Sink):
    """Files under ``path``, one directory per batch (``batch_id=N``), in any format Spark writes.

    Exactly-once: a replayed batch overwrites its own directory. ``path`` is a local path or any URI Spark
    can write (hdfs://, s3a://...). Read it back with :func:`floodmark.spark.read_panes` (the latest pane per key
    and window), :func:`~floodmark.spark.read_late`, :func:`~floodmark.spark.read_dead_letters`, or
    ``spark.read.format(format).load(path)`` (the ``batch_id`` column comes from the directory names).
    """

    path: str
    format: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)
    guarantee: ClassVar[str] = "exactly-once"
    runs_the_batch: ClassVar[bool] = True

    def batch_path(self, batch_id: int) -> str:
        return batch_directory(self.path, batch_id)

    def write(self, batch: OutputBatch) -> None:
        writer = batch.rows.write.mode("overwrite").format(self.format).options(**self.options)
        writer.save(self.batch_path(batch.batch_id))

    def discard_empty(self, spark: SparkSession, kind: str, batch_id: int) -> None:
        # An idle query must not leave a directory per tick.
        session_files(spark).delete_tree(self.batch_path(batch_id))

    def discard_after(self, spark: SparkSession, kind: str, batch_id: int) -> None:
        files = session_files(spark)
        for name in files.list_names(self.path):
            number = name.removeprefix(f"{BATCH_ID}=")
            if number.isdigit() and int(number) > batch_id:
                files.delete_tree(checkpoint_files.join(self.path, name))


@dataclass
class TableSink(Sink):
    """A Spark table (the session's catalog), partitioned by ``batch_id``; created by the first write.

    Exactly-once: each batch overwrites its own partition (``INSERT OVERWRITE ... PARTITION (batch_id = N)``),
    so a replay replaces what the crashed attempt wrote. An existing table must have the output's columns.

    :arg location: where a new table's files go (an external table); default: the session's warehouse. With a
        catalog that does not outlive the driver (Spark's default in-memory one), give a location: after a
        restart the table is registered again over its files, partitions included.
    """

    table: str
    format: str = "parquet"
    location: str | None = None
    guarantee: ClassVar[str] = "exactly-once"
    runs_the_batch: ClassVar[bool] = True

    def write(self, batch: OutputBatch) -> None:
        spark = batch.rows.sparkSession
        if not spark.catalog.tableExists(self.table):
            self._create(spark, batch.rows.schema)
        columns = [c for c in spark.table(self.table).columns if c != BATCH_ID]
        missing = sorted(set(columns) - set(batch.rows.columns))
        if missing:
            raise ValueError(f"table {self.table} has columns {missing} that floodmark's {batch.kind} rows lack")
        # A static partition overwrite replaces exactly this batch's partition, whatever the session's
        # partitionOverwriteMode; the SELECT lists the columns in the table's order (INSERT is positional).
        view = f"floodmark_{batch.kind}_{batch.batch_id}"
        batch.rows.createOrReplaceTempView(view)
        try:
            selected = ", ".join(sql_name(c) for c in columns)
            spark.sql(
                f"INSERT OVERWRITE TABLE {self.table} PARTITION ({BATCH_ID} = {batch.batch_id}) "
                f"SELECT {selected} FROM {view}"
            )
        finally:
            spark.catalog.dropTempView(view)

    def _create(self, spark: SparkSession, schema: StructType) -> None:
        """The table: ``schema``'s columns and ``batch_id``, partitioned by it. With a ``location`` that holds a
        table's files already (a catalog that forgot the table: an in-memory one after a driver restart), the
        table is registered over them, partitions included. The columns are declared, not inferred from files:
        the first batches of a query often have no panes, and an empty write leaves no file to infer from."""
        columns = ", ".join(f"{sql_name(f.name)} {f.dataType.simpleString()}" for f in schema.fields)
        location = ""
        if self.location is not None:
            location = " LOCATION '" + self.location.replace("\\", "\\\\").replace("'", "\\'") + "'"
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} ({columns}, {BATCH_ID} BIGINT) USING {self.format} "
            f"PARTITIONED BY ({BATCH_ID}){location}"
        )
        if self.location is not None and session_files(spark).list_names(self.location):
            spark.sql(f"ALTER TABLE {self.table} RECOVER PARTITIONS")

    def discard_empty(self, spark: SparkSession, kind: str, batch_id: int) -> None:
        # An idle query must not leave a partition per tick. Dropping an external table's partition keeps its
        # (empty) directory, which a later RECOVER PARTITIONS would register again.
        spark.sql(f"ALTER TABLE {self.table} DROP IF EXISTS PARTITION ({BATCH_ID} = {batch_id})")
        if self.location is not None:
            session_files(spark).delete_tree(batch_directory(self.location, batch_id))


@dataclass
class KafkaSink(Sink):
    """A Kafka topic: exactly-once with a ``transactional_id_prefix``, else at-least-once.

    Message key: the pane's key columns as a JSON object. Value: ``value_format="json"``: every column as
    a JSON object; ``"text"`` (panes only; late records and dead letters stay JSON): the clickstream job's line
    ``yyyyMMddHHmmss yyyyMMddHHmmss key... value...`` (window start and end in UTC). Pane messages carry
    the dedupe key ``(key, window_start, window_end, pane_index)`` as JSON in the ``floodmark-pane-id``
    header, every message its batch id in ``floodmark-batch-id``. A message goes to the partition Kafka's
    default partitioner picks for its key, so a key's messages share a partition, in order.

    **Exactly-once** (``transactional_id_prefix`` given; as Flink's ``KafkaSink`` with
    ``DeliveryGuarantee.EXACTLY_ONCE``): the driver writes each batch's messages of this kind in one Kafka
    transaction (transactional id ``<prefix>-<stage>-<kind>``), which also commits the batch id as a marker
    (the offset of partition 0 of ``topic`` in the consumer group named after the transactional id). A driver
    that restarts fences the one before it (a zombie's commit fails) and aborts the transaction it left open;
    a replayed batch whose id the marker already holds writes nothing. Consumers that read with
    ``isolation.level=read_committed`` see every batch's messages once; ``read_uncommitted`` consumers also see
    the messages of aborted attempts (as at-least-once, with the same dedupe key). What to keep in mind:

    * the prefix must be unique per query and sink (a second query with the same prefix is refused by name);
    * the batch's messages travel through the driver (one partition of rows at a time), inside a transaction
      that lasts as long as producing them: ``kafka.transaction.timeout.ms`` (default 60 s, at most the
      broker's ``transaction.max.timeout.ms``) must exceed that;
    * a driver killed inside a transaction leaves it open until the restart's driver aborts it or the timeout
      does; meanwhile ``read_committed`` consumers of the topic's partitions wait (Kafka's last stable offset);
    * the consumer group ``<prefix>-<stage>-<kind>`` holds the marker: do not consume with that group id.

    :arg options: more Kafka settings: ``kafka.*`` entries are producer settings (security, timeouts) in both
        modes; other entries are options of Spark's Kafka writer (at-least-once only).
    :arg transactional_id_prefix: makes the sink exactly-once (see above); needs floodmark's jar on the driver.
    """

    bootstrap_servers: str
    topic: str
    value_format: str = "json"
    options: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Not in the sink's text (error lines, logs): it holds credentials (``kafka.sasl.jaas.config``, passwords)."""
    transactional_id_prefix: str | None = None
    _columns: dict[tuple, tuple[Column, Column]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """(SparkContext, kind, key columns, value columns, their types) -> the message's key and value columns."""

    def __post_init__(self) -> None:
        if self.value_format not in ("json", "text"):
            raise ValueError(f"value_format must be 'json' or 'text', not {self.value_format!r}")
        if self.transactional_id_prefix is not None and not self.transactional_id_prefix.strip():
            raise ValueError("transactional_id_prefix must be a non-empty text (or None for at-least-once)")

    @property
    def guarantee(self) -> str:  # type: ignore[override]
        return "at-least-once" if self.transactional_id_prefix is None else "exactly-once (read_committed)"

    @property
    def runs_the_batch(self) -> bool:  # type: ignore[override]
        """At-least-once: Spark's Kafka writer runs the rows' plan (through DSv2, :func:`_append_to_kafka`)."""
        return self.transactional_id_prefix is None

    def transactional_id(self, batch: OutputBatch) -> str:
        """The Kafka transactional id (and marker group) of ``batch``'s stage and kind."""
        return f"{self.transactional_id_prefix}-{batch.stage or 'stage'}-{batch.kind}"

    def write(self, batch: OutputBatch) -> None:
        key, value = self._message(batch)
        # Only the batch id header changes from batch to batch: one py4j call, the rest was built once.
        headers = [_header_sql(BATCH_ID_HEADER, f"'{batch.batch_id}'")]
        if batch.kind == PANES:
            dedupe_key = ", ".join(sql_name(c) for c in (*batch.key_columns, WINDOW_START, WINDOW_END, PANE_INDEX))
            headers.append(_header_sql(PANE_ID_HEADER, f"to_json(struct({dedupe_key}))"))
        messages = batch.rows.select(key, value, F.expr(f"array({', '.join(headers)}) AS headers"))
        if self.transactional_id_prefix is not None:
            self._write_transaction(messages, batch)
            return
        options = {"kafka.bootstrap.servers": self.bootstrap_servers, "topic": self.topic, **self.options}
        _append_to_kafka(messages, options)

    def _write_transaction(self, messages: DataFrame, batch: OutputBatch) -> None:
        """One Kafka transaction through floodmark's data source (:data:`TRANSACTIONAL_SINK`), run on the driver by
        Spark: the same call from a classic session and from a Spark Connect server's ``foreachBatch``."""
        options = {
            "topic": self.topic,
            "transactionalId": self.transactional_id(batch),
            "batchId": str(batch.batch_id),
            "queryId": batch.query_id,
            "kafka.bootstrap.servers": self.bootstrap_servers,
            **{name: setting for name, setting in self.options.items() if name.startswith("kafka.")},
        }
        try:
            messages.write.format(TRANSACTIONAL_SINK).mode("append").options(**options).save()
        except Exception as error:
            if missing_data_source(error):
                raise RuntimeError(
                    f"an exactly-once KafkaSink needs floodmark's jar on the driver ({TRANSACTIONAL_SINK}): start the "
                    "session with floodmark.spark.configure_spark_with_floodmark or spark-submit --jars "
                    '"$(python -m floodmark.jvm --kafka)"; a Spark Connect server with the settings of '
                    "python -m floodmark.jvm --connect-server --kafka"
                ) from error
            raise

    def _message(self, batch: OutputBatch) -> tuple[Column, Column]:
        """The message's key and value columns (binary) for ``batch``'s kind and columns (cached: Column
        operations cost several py4j round trips each; parsed from SQL, a column is one call)."""
        text = self.value_format == "text" and batch.kind == PANES
        columns = (*batch.key_columns, *batch.value_columns)
        types = tuple(batch.rows.schema[c].dataType.simpleString() for c in columns) if text else ()
        # Columns belong to their session's JVM: a sink used again under a new SparkContext builds them anew.
        session = batch.rows.sparkSession  # Connect's columns are expressions of no JVM: one key for them all
        context = None if is_connect(session) else session.sparkContext
        cache_key = (context, batch.kind, batch.key_columns, batch.value_columns, types)
        if cache_key not in self._columns:
            keys = ", ".join(sql_name(c) for c in batch.key_columns)
            key = f"to_json(struct({keys}))" if keys else "CAST(NULL AS STRING)"
            value = (
                text_line(dict(zip(columns, types, strict=True)))
                if text
                else "to_json(struct(*), map('ignoreNullFields', 'false'))"  # every field, null or not
            )
            self._columns[cache_key] = (
                F.expr(f"CAST({key} AS BINARY) AS key"),
                F.expr(f"CAST({value} AS BINARY) AS value"),
            )
        return self._columns[cache_key]


TRANSACTIONAL_SINK = "floodmark.kafka.TransactionalSink"
"""The data source (in floodmark's jar) that writes an exactly-once :class:`KafkaSink`'s batches, one Kafka
transaction each, on the driver."""


V1_SOURCES = "spark.sql.sources.useV1SourceList"
"""The session setting that names the sources Spark reads and writes through their V1 API (Kafka by default)."""


def _append_to_kafka(messages: DataFrame, options: Mapping[str, str]) -> None:
    """Write ``messages`` with Spark's Kafka writer through its DSv2 API, so that the write runs the rows' own
    plan: a ``DataFrame.observe`` above them reports, and the write can be the job that computes the batch.

    Spark writes Kafka through V1 by default, and V1's ``KafkaWriter`` runs a copy of the plan whose
    observations never reach the caller (so the batch would need a job of its own). The V1 list is changed only
    for this call, in the session of the rows (in ``foreachBatch`` the query's own clone of the user's session).
    """
    conf = messages.sparkSession.conf
    v1_sources = conf.get(V1_SOURCES) or ""
    without_kafka = ",".join(s for s in v1_sources.split(",") if s.strip().lower() != "kafka")
    conf.set(V1_SOURCES, without_kafka)
    try:
        messages.write.format("kafka").mode("append").options(**options).save()
    finally:
        conf.set(V1_SOURCES, v1_sources)


def _header_sql(name: str, text: str) -> str:
    """A Kafka header (``struct<key: string, value: binary>``) in SQL, its value the text ``text`` evaluates to."""
    return f"struct('{name}' AS key, CAST({text} AS BINARY) AS value)"


@dataclass
class FunctionSink(Sink):
    """Your function, called as ``function(rows, batch_id)`` for each batch with rows of this kind.

    The rows are cached for the call; the guarantee is the function's: a replayed batch calls it again
    with the same batch id and the same rows (write idempotently per batch id for exactly-once).
    """

    function: Callable[[DataFrame, int], None]
    guarantee: ClassVar[str] = "as the function makes it (called again, same batch id, on replay)"
    runs_your_code: ClassVar[bool] = True

    def write(self, batch: OutputBatch) -> None:
        self.function(batch.rows, batch.batch_id)


@dataclass(frozen=True)
class DiscardSink(Sink):
    """Panes nobody reads: not written (no Spark job, no files). For an intermediate stage of a pipeline, whose
    panes reach its downstream stages inside the query whatever its sink; they still count in its reports."""

    guarantee: ClassVar[str] = "not written"
    discards: ClassVar[bool] = True

    def write(self, batch: OutputBatch) -> None:
        raise AssertionError("a DiscardSink is never written")  # the batch skips its output


@dataclass(frozen=True)
class Outputs:
    """Where each kind goes. ``EventTimeAggregation.start(output=...)`` takes this or a root path
    (:meth:`files`)."""

    panes: Sink
    late: Sink
    dead_letter: Sink

    def __post_init__(self) -> None:
        if self.late.discards or self.dead_letter.discards:
            raise ValueError("late records and dead letters cannot be discarded: give them a sink")

    @classmethod
    def files(cls, root: str, file_format: str = "parquet", panes: bool = True) -> Outputs:
        """The default layout: ``<root>/panes``, ``<root>/late``, ``<root>/dead_letter`` (exactly-once); with
        ``panes=False`` the panes are not written (:class:`DiscardSink`), late records and dead letters are."""
        pane_sink: Sink = FileSink(checkpoint_files.join(root, PANES), file_format) if panes else DiscardSink()
        return cls(
            pane_sink, *(FileSink(checkpoint_files.join(root, kind), file_format) for kind in (LATE, DEAD_LETTER))
        )

    @classmethod
    def kafka(
        cls,
        bootstrap_servers: str,
        panes: str,
        late: str,
        dead_letter: str,
        pane_format: str = "json",
        options: Mapping[str, str] | None = None,
        transactional_id_prefix: str | None = None,
    ) -> Outputs:
        """Three Kafka topics: exactly-once with a ``transactional_id_prefix`` (one for the three: each kind
        gets its own transactional id), else at-least-once (see :class:`KafkaSink`)."""
        extra = dict(options or {})
        prefix = transactional_id_prefix
        return cls(
            KafkaSink(bootstrap_servers, panes, pane_format, extra, prefix),
            KafkaSink(bootstrap_servers, late, "json", extra, prefix),
            KafkaSink(bootstrap_servers, dead_letter, "json", extra, prefix),
        )

    @classmethod
    def of(cls, output: str | Outputs) -> Outputs:
        return output if isinstance(output, Outputs) else cls.files(output)

    def sink(self, kind: str) -> Sink:
        return {PANES: self.panes, LATE: self.late, DEAD_LETTER: self.dead_letter}[kind]

    def client_paths(self, spark: SparkSession) -> Outputs:
        """These outputs with their file sinks' paths and tables' locations as ``spark`` must be given them
        (:func:`~floodmark.spark.connect.client_path`: over Spark Connect a relative path is the client's); the
        same outputs on a classic session."""
        if not is_connect(spark):
            return self

        def on_client(sink: Sink) -> Sink:
            if isinstance(sink, FileSink):
                return replace(sink, path=client_path(spark, sink.path))
            if isinstance(sink, TableSink) and sink.location is not None:
                return replace(sink, location=client_path(spark, sink.location))
            return sink

        return Outputs(*(on_client(self.sink(kind)) for kind in KINDS))

    def check_before_start(self, connect: bool = False) -> None:
        """A ``ValueError`` before the query starts when a file sink's path cannot be a directory
        (:func:`~floodmark.driver.checkpoint_files.require_directory`) or, with ``connect`` (a Spark Connect
        session), a file sink's or a table's location is not an absolute plain path
        (:func:`~floodmark.spark.connect.connect_path_problem`)."""
        for kind in KINDS:
            sink = self.sink(kind)
            location = sink.path if isinstance(sink, FileSink) else getattr(sink, "location", None)
            if isinstance(sink, FileSink):
                checkpoint_files.require_directory(sink.path, f"the {kind} output")
            problem = connect_path_problem(location) if connect and location is not None else None
            if problem is not None:
                raise ValueError(f"the {kind} output {location} cannot be used: {problem}")

    def discard_after(self, spark: SparkSession, batch_id: int) -> None:
        for kind in KINDS:
            self.sink(kind).discard_after(spark, kind, batch_id)


def batch_directory(root: str, batch_id: int) -> str:
    """Where batch ``batch_id``'s files go under ``root`` (a file sink's path, a table's location)."""
    return f"{root}/{BATCH_ID}={batch_id}"


def compact_utc(millis: str) -> str:
    """SQL: the ms since the epoch in ``millis`` as ``yyyyMMddHHmmss`` in UTC, whatever the session's time zone."""
    # date_format renders in the session's zone: shift the instant so that its local rendering is UTC's.
    return f"date_format(to_utc_timestamp(timestamp_millis({millis}), current_timezone()), 'yyyyMMddHHmmss')"


def text_line(column_types: Mapping[str, str]) -> str:
    """SQL: the clickstream job's result line, as :func:`floodmark.apps.outputs.text_lines` writes it (integral floats
    as ints). ``column_types``: the key columns, then the value columns, each with its Spark type (``simpleString``)."""

    def text(name: str, spark_type: str) -> str:
        column = sql_name(name)
        if spark_type in ("double", "float"):
            whole = f"CAST(CAST({column} AS BIGINT) AS STRING)"
            return f"CASE WHEN {column} = floor({column}) THEN {whole} ELSE CAST({column} AS STRING) END"
        return f"CAST({column} AS STRING)"

    parts = [compact_utc(WINDOW_START), compact_utc(WINDOW_END)]
    parts += [text(name, spark_type) for name, spark_type in column_types.items()]
    return f"concat_ws(' ', {', '.join(parts)})"
