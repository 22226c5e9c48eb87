"""The tick source: a batch with no input runs only when the driver asks for one.

Spark runs a micro-batch when one of the query's sources has new data. floodmark unions its input with
tick rows, one per state bucket, so that every bucket runs in a batch that needs it even without input
(:mod:`floodmark.driver.next_batch` says when). Spark's own ``rate-micro-batch`` source would give ticks at
every trigger: an idle query would run a whole batch per trigger and keep a core busy. This source gives
them when the driver asked: after each batch the controller writes a request, ``{"seq": s, "due": t}``
(:class:`TickSchedule`), into a small local file, and the source reads it at every trigger.

Offsets are ``{"seq": s}``. ``latestOffset`` returns the request's ``seq`` once the wall clock has reached its
``due`` time (ms) and ``seq`` is above the batch's start offset; otherwise the start offset (no new data: no
batch unless the input has some). A batch whose tick offset moved reads ``rows`` rows, ``tick`` = 0 ..
rows - 1; a replayed batch reads the same. ``seq`` is the wall-clock time of the request, kept increasing,
so offsets never go back, after a restart either (when the file is gone, the new run's first request is
newer than anything logged).

Two implementations of this one source: :data:`JVM_SOURCE` (the Maven module ``jvm/floodmark``, whose jar the
package carries, on the classpath of floodmark's sessions) and the Python data source below, used when the
session cannot load the former (a session of your own built without
:func:`~floodmark.spark.driver.session.configure_spark_with_floodmark`); the log says which one runs. Spark runs a
Python data source's planning in Python processes of the driver: in a cold session they cost ~4 s before the
query starts and ~3 s in its first batch (docs/PERFORMANCE.md), which the JVM source does not. Both read the
same request file and log the same offsets, so a checkpoint resumes with either.

``initialOffset``, ``latestOffset`` and ``partitions`` run on the driver, so the file must be local to the
driver: under a local checkpoint, or in the temporary directory for a checkpoint on another file system.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from floodmark.driver import checkpoint_files, checkpoint_layout
from floodmark.driver.checkpoint_layout import floodmark_path
from floodmark.jvm import missing_jar
from floodmark.spark.connect import is_connect

_LOG = logging.getLogger(__name__)

PYTHON_TICKS_ENV = "FLOODMARK_PYTHON_TICKS"
"""Set to ``1`` to run the Python tick source even where the JVM one loads (to test it)."""

SOURCE_NAME = "floodmark_ticks"
"""The Python source's name."""
JVM_SOURCE = "floodmark.ticks.TickSourceProvider"
"""The JVM source's class (``jvm/floodmark``)."""
SCHEMA = "tick INT"


def schedule_path(checkpoint: str) -> Path:
    """Where the query with ``checkpoint`` keeps its tick requests (a file local to the driver)."""
    if not checkpoint_files.has_scheme(checkpoint):
        return Path(floodmark_path(checkpoint, checkpoint_layout.TICKS))
    digest = hashlib.sha256(checkpoint.encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir(), "floodmark-ticks", f"{digest}.json")


class TickSchedule:
    """The driver's side: :meth:`request` the next tick batch ``delay_ms`` from now (0: at the next trigger).

    A request replaces the previous one, granted or not. ``clock`` returns wall-clock seconds (the source
    compares the due time with its own wall clock, whatever clock the driver's processing time follows).
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self.last_seq = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def request(self, delay_ms: int) -> None:
        now = int(self.clock() * 1000)
        self.last_seq = max(now, self.last_seq + 1, read_request(self.path)[0] + 1)
        # A Spark Connect client requests too (FloodmarkQuery.finish_when_input_exhausted): a scratch file each.
        scratch = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        scratch.write_text(json.dumps({"seq": self.last_seq, "due": now + max(0, int(delay_ms))}))
        os.replace(scratch, self.path)  # the source never reads half a request


def read_request(path: Path) -> tuple[int, int]:
    """``(seq, due)`` of the newest request, ``(0, 0)`` when there is none yet."""
    try:
        request = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return 0, 0
    return int(request["seq"]), int(request["due"])


class TickBatch(InputPartition):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class TickStreamReader(DataSourceStreamReader):
    """Offsets ``{"seq": s}``: see the module docstring."""

    def __init__(self, path: Path, rows: int, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.rows = rows
        self.clock = clock

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        seq, due = read_request(self.path)
        if seq > int(start["seq"]) and self.clock() * 1000 >= due:
            return {"seq": seq}
        return start

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [TickBatch(self.rows)] if int(end["seq"]) > int(start["seq"]) else []

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        assert isinstance(partition, TickBatch)
        for tick in range(partition.rows):
            yield (tick,)

    def commit(self, end: dict) -> None:
        """Nothing to release."""


class TickSource(DataSource):
    """``spark.readStream.format("floodmark_ticks").option("path", ...).option("rows", n)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TickStreamReader(Path(self.options["path"]), int(self.options["rows"]))


def tick_rows(spark: SparkSession, path: Path, count: int) -> DataFrame:
    """``count`` rows, column ``tick`` = 0..count-1, in each batch the driver asked for (see the module)."""
    if jvm_source_loadable(spark):
        _LOG.info("floodmark: the JVM tick source (%s) runs", JVM_SOURCE)
        reader = spark.readStream.format(JVM_SOURCE)
    else:
        if os.environ.get(PYTHON_TICKS_ENV) == "1":
            _LOG.info("floodmark: the Python tick source runs (%s=1)", PYTHON_TICKS_ENV)
        elif not is_connect(spark) and (missing := missing_jar()) is not None:
            # Nothing to give the session: the installation lacks the jar (a Connect server has its own).
            _LOG.warning(
                "floodmark: the Python tick source runs and outputs are unpacked in Python (a query starts seconds "
                "slower, its batches take longer): %s",
                missing,
            )
        else:
            _LOG.warning(
                "floodmark: the Python tick source runs and outputs are unpacked in Python (a query starts seconds "
                "slower, its batches take longer): this session cannot load %s; give it floodmark's jar: "
                'floodmark.spark.configure_spark_with_floodmark(builder), or with spark-submit, --jars "$(python -m '
                'floodmark.jvm)"',
                JVM_SOURCE,
            )
        spark.dataSource.register(TickSource)
        reader = spark.readStream.format(SOURCE_NAME)
    return reader.option("path", str(path)).option("rows", str(count)).load()


def jvm_source_loadable(spark: SparkSession) -> bool:
    """Whether the session's driver can load :data:`JVM_SOURCE` (``FLOODMARK_PYTHON_TICKS=1`` says no: the
    Python source then runs, e.g. to test it). A Spark Connect server can when it runs floodmark's session
    extensions (they come with the jar; the client cannot ask the server's JVM otherwise)."""
    if os.environ.get(PYTHON_TICKS_ENV) == "1":
        return False
    if is_connect(spark):
        from floodmark.spark.sql_functions import register_functions

        return register_functions(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(JVM_SOURCE))
