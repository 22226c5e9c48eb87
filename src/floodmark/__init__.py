"""floodmark: Flink/Beam-grade event time for PySpark.

The user-facing names::

    from floodmark import WindowSpec, windows, triggers, aggregates, AccumulationMode, TimestampCombiner
    from floodmark import WatermarkStrategy, WatermarkGenerator
    from floodmark.testing import WindowHarness, TestStream
    from floodmark.spark import EventTimeAggregation, SourceTime, local_session   # needs pyspark
"""

from floodmark.core import aggregates, triggers, windows
from floodmark.core.panes import AccumulationMode, Pane, Timing
from floodmark.core.records import BadRecord, LateReason, LateRecord
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.watermarks import WatermarkGenerator, WatermarkStrategy

__version__ = "0.1.0"

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "AccumulationMode",
    "BadRecord",
    "LateReason",
    "LateRecord",
    "Pane",
    "TimestampCombiner",
    "Timing",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "WindowSpec",
    "aggregates",
    "triggers",
    "windows",
]
