"""The rows between floodmark's operators and to the driver: their kinds and ``fm_`` columns, declared once.

Every internal column is prefixed ``fm_`` so that it never clashes with a user column. Where rows travel:

* the map-side combiner's rows: the input rows plus :data:`COMBINER_COLUMNS`, an accumulator column per
  accumulator (:func:`accumulator`) and :data:`REJECTED_COLUMNS`; ``fm_row`` (:data:`ROW`) says what a row is:
  RAW (a record), PARTIAL (partial aggregates of one key and window), BAD_INPUT (a rejected record with its
  reason) or SPLIT_STATS (count, min and max timestamp of one split's good records in one partition). They
  cross the shuffle packed, one Arrow IPC block per bucket (:data:`SHUFFLE_COLUMNS`);
* a bucket's output: one wide row form whose ``fm_kind`` (:data:`KIND`) says which kind of row it is: PANE,
  LATE and BAD (:data:`EMITTED_KINDS`, in the columns of :mod:`floodmark.protocol.output`), STATS (a split's
  statistics, :data:`STATS_COLUMNS`) and GAUGE (what the bucket reports after it ran, :data:`GAUGE_COLUMNS`);
* *carrier* rows (:data:`CARRIER_COLUMNS`) between the stateful operators' levels and into the sink, whose
  ``fm_kind`` is IN (a block of a stage's input rows), TICK (a bucket must run without input), OUTPUT (a block
  of one bucket's panes, late records and dead letters, in the order the bucket emitted them: at most
  :data:`OUTPUT_BLOCK_ROWS` rows each, so a bucket that emits more writes several), STATS or GAUGE
  (:data:`REPORT_KINDS`: what the driver reads, in :data:`REPORT_COLUMNS`).
"""

from __future__ import annotations

from floodmark.protocol.columns import BINARY, INT, LONG, STRING, typed

# ------------------------------------------------------------------ kinds
KIND = "fm_kind"
"""A bucket's or a carrier row's kind."""
IN, TICK, OUTPUT = "IN", "TICK", "OUTPUT"
PANE, LATE, BAD = "PANE", "LATE", "BAD"
STATS, GAUGE = "STATS", "GAUGE"
EMITTED_KINDS = (PANE, LATE, BAD)
"""What a stage emits: panes, late records, dead letters."""
REPORT_KINDS = (STATS, GAUGE)
"""What the driver reads of a batch."""
OUTPUT_BLOCK_ROWS = 65_536
"""The most rows an OUTPUT block holds (its bytes: ~100 per pane row). A batch that fires millions of windows in one
bucket (the end of the input) carries them in many blocks, not one value of hundreds of MB: Spark's binary values
stop at 2 GiB, and the sink's cache of the batch copies each carrier row whole (one such row exhausted a 2 GB heap)."""

ROW = "fm_row"
"""A combiner row's kind."""
RAW, PARTIAL, BAD_INPUT, SPLIT_STATS = "R", "P", "B", "S"

# ---------------------------------------------------------------- columns
STAGE = "fm_stage"
"""The stage a carrier row is for (its name in the query's graph)."""
BUCKET = "fm_bucket"
"""A state bucket's label (:mod:`floodmark.spark.stateful.bucket_layout`)."""
BLOCK = "fm_block"
"""Rows packed as one Arrow IPC stream."""

SPLIT = "fm_split"
DEAD_LETTERS_SPLIT = "\x00dead letters"
"""The split label of a SPLIT_STATS or STATS row that counts, in ``fm_count``, the rows of the batch that are no
record of their source (not parsed, no usable event time: every stage reading the source refuses them alike), its
times 0; with the source's name before it as other labels (``<source>/<label>``). The stage that reports its
source's splits reports them, so each is counted once whatever reads it. No split value's label starts with NUL."""
COUNT = "fm_count"
"""Records: of a split (SPLIT_STATS, STATS) or of a partial aggregate (PARTIAL). In a GAUGE row: the dead letters
the bucket made of its own work (a process function's calls that raised, rows that do not fit its output), not
input it refused; null when none can be (a window stage)."""
MIN_TS = "fm_min_ts"
MAX_TS = "fm_max_ts"
WINDOW_START = "fm_window_start"
WINDOW_END = "fm_window_end"
HOLD = "fm_hold"
"""A hold on the output watermark: a partial aggregate's (PARTIAL), a bucket's lowest (GAUGE)."""
REASON = "fm_reason"
RECORD = "fm_record"
ORDER = "fm_order"
"""A record's place in its batch's input (``fm_row_position()`` in floodmark's jar: input partition, then row):
the JVM map side's RAW rows cross a second shuffle, and the processor takes a bucket's RAW rows in this order.
Null from the Arrow combiner (its blocks keep the input order)."""

SEQ = "fm_seq"
"""The control entry a bucket ran with."""
OLDEST_PENDING = "fm_oldest_pending"
OPEN_WINDOWS = "fm_open_windows"
NEXT_FIRE = "fm_next_fire"
"""The bucket's ``next_watermark_deadline``."""
NEXT_TIMER = "fm_next_timer"
"""The bucket's ``next_processing_deadline``."""
PANE_COUNT = "fm_pane_count"
LATE_COUNT = "fm_late_count"
BAD_COUNT = "fm_bad_count"
ACCEPTED = "fm_accepted"
"""(record, window) pairs the bucket added to windows."""

TYPES = {
    KIND: STRING,
    ROW: STRING,
    STAGE: STRING,
    BUCKET: INT,
    BLOCK: BINARY,
    SPLIT: STRING,
    COUNT: LONG,
    MIN_TS: LONG,
    MAX_TS: LONG,
    WINDOW_START: LONG,
    WINDOW_END: LONG,
    HOLD: LONG,
    REASON: STRING,
    RECORD: STRING,
    ORDER: LONG,
    SEQ: LONG,
    OLDEST_PENDING: LONG,
    OPEN_WINDOWS: LONG,
    NEXT_FIRE: LONG,
    NEXT_TIMER: LONG,
    PANE_COUNT: LONG,
    LATE_COUNT: LONG,
    BAD_COUNT: LONG,
    ACCEPTED: LONG,
}
"""Every ``fm_`` column's neutral type."""

# ----------------------------------------------------------------- groups
COMBINER_COLUMNS = typed(TYPES, (ROW, SPLIT, WINDOW_START, WINDOW_END, COUNT, HOLD, MIN_TS, MAX_TS, ORDER))
"""The columns the map-side combiner adds to the input rows, before the accumulators."""
REJECTED_COLUMNS = typed(TYPES, (REASON, RECORD))
"""The combiner's last columns: why a BAD_INPUT row was rejected, and the record."""
SHUFFLE_COLUMNS = typed(TYPES, (BUCKET, BLOCK))
"""A row of the shuffle: a bucket's rows of one input partition, packed."""

STATS_COLUMNS = typed(TYPES, (SPLIT, COUNT, MIN_TS, MAX_TS))
"""A STATS row (and a SPLIT_STATS row): one split's good records in one input partition."""
GAUGES = (HOLD, OLDEST_PENDING, OPEN_WINDOWS, NEXT_FIRE, NEXT_TIMER)
"""What a bucket reports after it ran and the driver keeps (``BucketGauges``)."""
COUNTS = {PANE: PANE_COUNT, LATE: LATE_COUNT, BAD: BAD_COUNT}
"""Emitted kind -> the GAUGE column in which each bucket counts what it emitted of that kind."""
GAUGE_COLUMNS = typed(TYPES, (SEQ, BUCKET, *GAUGES, *COUNTS.values(), ACCEPTED))
"""A GAUGE row: one bucket after it ran."""
REPORT_COLUMNS = STATS_COLUMNS + GAUGE_COLUMNS
"""The STATS and GAUGE rows' columns (one form for both)."""
CARRIER_COLUMNS = typed(TYPES, (STAGE, KIND, BLOCK)) + REPORT_COLUMNS
"""A carrier row (``fm_bucket`` among the report columns)."""


def accumulator(index: int) -> str:
    """The column of a PARTIAL row's accumulator ``index`` (its type follows the accumulator's)."""
    return f"fm_acc_{index}"
