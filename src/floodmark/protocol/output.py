"""The columns users get besides their key and aggregate columns: pane, late-record and dead-letter metadata.

A stage emits one row form (``fm_kind`` PANE, LATE or BAD: :mod:`floodmark.protocol.wire`): the key columns,
:data:`PANE_COLUMNS`, the aggregate columns, :data:`RECORD_COLUMNS`. Each output then takes its own columns:
panes the keys, :data:`PANE_COLUMNS` and the aggregates; late records the keys and :data:`LATE_COLUMNS`; dead
letters the keys and :data:`DEAD_LETTER_COLUMNS`. Times are in ms; ``window_end`` is exclusive.

A join stage emits joined rows where a window stage emits panes (``fm_kind`` PANE: the key columns, each side's
columns as ``left_<name>`` / ``right_<name>``, ``join_time``), and its late rows have the keys and
:data:`JOIN_LATE_COLUMNS` (no window).
"""

from __future__ import annotations

from floodmark.protocol.columns import BOOL, LONG, STRING, names, typed

WINDOW_START = "window_start"
WINDOW_END = "window_end"
PANE_TIMESTAMP = "pane_timestamp"
TIMING = "timing"
PANE_INDEX = "pane_index"
NONSPECULATIVE_INDEX = "nonspeculative_index"
IS_LAST = "is_last"

EVENT_TIME = "event_time"
WATERMARK = "watermark"
LATENESS = "lateness"
HORIZON = "horizon"
REASON = "reason"
RECORD = "record"
"""A late record or dead letter itself: its original text where the input kept it, else its columns as JSON."""
SIDE = "side"
"""Which input of a join a late row came from: ``LEFT`` or ``RIGHT``."""

WINDOW_START_TIME = "window_start_time"
WINDOW_END_TIME = "window_end_time"
"""``window_start`` and ``window_end`` as timestamps, added by the sink to every output with a window."""
BATCH_ID = "batch_id"
"""The micro-batch that wrote a row: the partition column of file and table outputs."""

TYPES = {
    WINDOW_START: LONG,
    WINDOW_END: LONG,
    PANE_TIMESTAMP: LONG,
    TIMING: STRING,
    PANE_INDEX: LONG,
    NONSPECULATIVE_INDEX: LONG,
    IS_LAST: BOOL,
    EVENT_TIME: LONG,
    WATERMARK: LONG,
    LATENESS: LONG,
    HORIZON: LONG,
    REASON: STRING,
    RECORD: STRING,
    SIDE: STRING,
}

PANE_COLUMNS = typed(
    TYPES, (WINDOW_START, WINDOW_END, PANE_TIMESTAMP, TIMING, PANE_INDEX, NONSPECULATIVE_INDEX, IS_LAST)
)
"""A pane's metadata (a pane row holds its key columns, these, its aggregate columns)."""
RECORD_COLUMNS = typed(TYPES, (EVENT_TIME, WATERMARK, LATENESS, HORIZON, REASON, RECORD))
"""A late record's metadata, after the pane columns in the emitted row form."""
LATE_COLUMNS = typed(TYPES, (WINDOW_START, WINDOW_END)) + RECORD_COLUMNS
"""The late-record output's columns after the keys: the window it was late for, then its metadata."""
JOIN_LATE_COLUMNS = typed(TYPES, (SIDE,)) + RECORD_COLUMNS
"""A join stage's late-row output's columns after the keys: the side it came from, then its metadata (a join has
no windows)."""
DEAD_LETTER_COLUMNS = typed(TYPES, (EVENT_TIME, REASON, RECORD))
"""The dead-letter output's columns after the keys (``event_time`` null when it had none)."""

RESERVED = frozenset([*names(PANE_COLUMNS), *names(RECORD_COLUMNS), WINDOW_START_TIME, WINDOW_END_TIME, BATCH_ID])
"""Names no key or aggregate column may take."""
