"""floodmark: Flink/Beam-grade event time for PySpark.

The user-facing names::

    from floodmark import WindowSpec, windows, triggers, aggregates, AccumulationMode, TimestampCombiner
    from floodmark import WatermarkStrategy, WatermarkGenerator
    from floodmark import KeyedProcessFunction, ProcessContext, Timer, TimeDomain   # keyed process functions
    from floodmark.testing import WindowHarness, TestStream
    from floodmark.spark import EventTimeAggregation, SourceTime, local_session   # needs pyspark
"""

from typing import TYPE_CHECKING

from floodmark.lazy import lazy_exports

if TYPE_CHECKING:
    from floodmark.core import aggregates, triggers, windows
    from floodmark.core.panes import AccumulationMode, Pane, Timing
    from floodmark.core.process import KeyedProcessFunction, ProcessContext, TimeDomain, Timer
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
    "KeyedProcessFunction",
    "LateReason",
    "LateRecord",
    "Pane",
    "ProcessContext",
    "TimeDomain",
    "Timer",
    "TimestampCombiner",
    "Timing",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "WindowSpec",
    "aggregates",
    "triggers",
    "windows",
]

# Imported on first use (floodmark.lazy: Spark's Python processes that only need floodmark.spark.sources.ticks).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "aggregates": "floodmark.core",
        "triggers": "floodmark.core",
        "windows": "floodmark.core",
        "AccumulationMode": "floodmark.core.panes",
        "Pane": "floodmark.core.panes",
        "Timing": "floodmark.core.panes",
        "BadRecord": "floodmark.core.records",
        "KeyedProcessFunction": "floodmark.core.process",
        "ProcessContext": "floodmark.core.process",
        "TimeDomain": "floodmark.core.process",
        "Timer": "floodmark.core.process",
        "LateReason": "floodmark.core.records",
        "LateRecord": "floodmark.core.records",
        "WindowSpec": "floodmark.core.spec",
        "MAX_TIMESTAMP": "floodmark.core.time",
        "MIN_TIMESTAMP": "floodmark.core.time",
        "TimestampCombiner": "floodmark.core.timestamps",
        "WatermarkGenerator": "floodmark.core.watermarks",
        "WatermarkStrategy": "floodmark.core.watermarks",
    },
)
