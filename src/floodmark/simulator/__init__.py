"""Data simulators for demos and tests (pure Python/numpy; the Spark source lives in :mod:`.spark_source`).

:mod:`.clickstream` is the clickstream job's producer (channels a..d, seven behaviours, event time trailing
processing time by 120 s, out of order) with a split that goes quiet, a burst of late records and bad records.
"""

from floodmark.simulator.clickstream import (
    BEHAVIORS,
    CHANNELS,
    COLUMNS,
    DEFAULT_START_MS,
    DEMO_TICKS_PER_SECOND,
    ClickstreamConfig,
    generate,
    generate_tick,
    limit_end_tick,
    paced_latest_tick,
    straight_counts,
    tick_processing_time,
    tick_record_count,
    ts_dtype,
)

__all__ = [
    "BEHAVIORS",
    "CHANNELS",
    "COLUMNS",
    "DEFAULT_START_MS",
    "DEMO_TICKS_PER_SECOND",
    "ClickstreamConfig",
    "generate",
    "generate_tick",
    "limit_end_tick",
    "paced_latest_tick",
    "straight_counts",
    "tick_processing_time",
    "tick_record_count",
    "ts_dtype",
]
