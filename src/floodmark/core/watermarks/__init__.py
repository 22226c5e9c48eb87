"""Watermarks: generators, idleness, the split multiplexer, the source coordinator, stages.

The arithmetic follows Flink's ``org.apache.flink.api.common.eventtime`` package;
see each module for the exact rule it implements.
"""

from floodmark.core.watermarks.alignment import WatermarkAlignment
from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.core.watermarks.bounded import (
    AscendingTimestamps,
    BoundedOutOfOrderness,
    LegacyBoundedOutOfOrderness,
)
from floodmark.core.watermarks.coordinator import SourceWatermarks
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.idle_advancing import BoundedOutOfOrdernessWatermarkBasedOnEventTime
from floodmark.core.watermarks.idleness import IdlenessTimer, WatermarksWithIdleness
from floodmark.core.watermarks.multiplexer import SplitOutput, WatermarkMultiplexer
from floodmark.core.watermarks.output import RecordingOutput, WatermarkOutput
from floodmark.core.watermarks.percentile import PercentileOfRecentTimestamps
from floodmark.core.watermarks.stage import StageTimes, StageWatermark
from floodmark.core.watermarks.strategy import WatermarkStrategy

__all__ = [
    "AscendingTimestamps",
    "BoundedOutOfOrderness",
    "BoundedOutOfOrdernessWatermarkBasedOnEventTime",
    "GeneratorView",
    "IdlenessTimer",
    "LegacyBoundedOutOfOrderness",
    "PercentileOfRecentTimestamps",
    "RecordingOutput",
    "SourceWatermarks",
    "SplitBatchStats",
    "SplitOutput",
    "StageTimes",
    "StageWatermark",
    "WatermarkAlignment",
    "WatermarkGenerator",
    "WatermarkMultiplexer",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
]
