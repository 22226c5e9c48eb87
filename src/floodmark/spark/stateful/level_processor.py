"""The ``transformWithStateInPandas`` processor of a level (:class:`floodmark.spark.stateful.levels.StageLevel`),
light to
unpickle.

Spark 4.3 plans every ``transformWithStateInPandas`` at each query start in a Python process on the driver, which
unpickles the processor and calls its ``init`` to learn its state variables. This module imports only pyspark's
streaming API and types, and the processor carries its level pickled, unpickled on its first rows: that process
does not import pandas, pyarrow or floodmark's operators (~0.4 s per level and query start here). The state
variables' schemas live here for the same reason (:mod:`floodmark.spark.stateful.bucket_state` says what they hold).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

if TYPE_CHECKING:
    import pandas as pd

    from floodmark.spark.stateful.levels import StageLevel

BLOB_SCHEMA = StructType([StructField("blob", BinaryType())])
"""A format-1 bucket value, and a chunk of a format-2 part."""
HEAD_SCHEMA = StructType([StructField("manifest", StringType()), StructField("blob", BinaryType())])
"""A format-2 bucket's value state: its manifest, JSON ``{"head": chunks, "segments": {id: chunks}}``, and the
head's first chunk."""
PART_KEY_SCHEMA = StructType(
    [StructField("part", StringType()), StructField("id", LongType()), StructField("chunk", IntegerType())]
)
"""A format-2 part's chunk in the map state: ``("head", 0, i)`` for ``i >= 1`` or ``("segment", id, i)``."""


class LevelStatefulProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` form of a :class:`~floodmark.spark.stateful.levels.StageLevel`: every level
    in state
    format 2 (``parts``), levels 2 and later in format 1."""

    def __init__(self, level: StageLevel, parts: bool) -> None:
        self.level_bytes = cloudpickle.dumps(level)
        self.parts = parts
        self._level: StageLevel | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        if self.parts:
            self.head = handle.getValueState("head", HEAD_SCHEMA)
            self.map = handle.getMapState("parts", PART_KEY_SCHEMA, BLOB_SCHEMA)
        else:
            self.blob = handle.getValueState("blob", BLOB_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        from floodmark.spark.stateful.bucket_state import (  # the executors' imports, not the driver's
            BlobState,
            PartsState,
        )

        if self._level is None:
            self._level = cloudpickle.loads(self.level_bytes)
        level = self._level
        stage, bucket = key
        if self.parts:
            yield level.run(
                str(stage), bucket, level.frame(rows), PartsState(self.head, self.map, level.state_value_bytes)
            )
            return
        blob = BlobState(self.blob.get()[0] if self.blob.exists() else None)
        out = level.run(str(stage), bucket, level.frame(rows), blob)
        if blob.new_value is not None:
            self.blob.update((blob.new_value,))
        yield out

    def close(self) -> None:
        pass
