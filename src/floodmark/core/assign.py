"""A batch of records into (record, window) pairs: the window operator's input step.

Records without a usable timestamp become bad records; (record, window) pairs
whose window the watermark has passed beyond its horizon go to the late output
(``EXPIRED``). Nothing is dropped silently.
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.records import BadRecord, LateReason, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.time import event_time_in_range, future_skew_reason, out_of_range_reason
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.values import unwrap
from floodmark.core.windows import Window, window_expired


def validate_timestamps(timestamps: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Split raw timestamps into usable ``int64`` values and a bad-record mask.

    A usable timestamp is a whole number of ms within the supported event-time range
    (:data:`~floodmark.core.time.EARLIEST_EVENT_TIME` .. :data:`~floodmark.core.time.LATEST_EVENT_TIME`,
    both inclusive); anything else (missing, NaN, not a number, a fraction of a ms, outside the range) makes
    the record a bad record.

    :returns: ``(values, bad_mask, reasons)``; ``values[i]`` is 0 where ``bad_mask[i]``; ``reasons`` has one
        message per bad record, in order.
    """
    array = np.asarray(timestamps)
    if array.dtype.kind in "iu" and (array.dtype.kind == "i" or array.dtype.itemsize < 8):
        values = array.astype(np.int64, copy=False)
        bad = ~event_time_in_range(values)
        if not bad.any():
            return values, bad, []
        reasons = [out_of_range_reason(int(v)) for v in values[bad].tolist()]
        return np.where(bad, 0, values), bad, reasons
    values = np.zeros(len(array), dtype=np.int64)
    bad = np.zeros(len(array), dtype=bool)
    reasons: list[str] = []
    for i, raw in enumerate(array.tolist()):
        reason = None
        if raw is None or (isinstance(raw, float) and math.isnan(raw)):
            reason = "missing timestamp"
        elif isinstance(raw, bool) or not isinstance(raw, numbers.Real):
            reason = f"timestamp is not a number: {raw!r}"
        elif isinstance(raw, float) and not raw.is_integer():
            reason = f"timestamp is not whole milliseconds: {raw!r}"
        elif not event_time_in_range(int(raw)):
            reason = out_of_range_reason(int(raw))
        if reason is None:
            values[i] = int(raw)
        else:
            bad[i] = True
            reasons.append(reason)
    return values, bad, reasons


def validate_future_skew(
    timestamps: np.ndarray, processing_time: int, max_future_skew: int
) -> tuple[np.ndarray, Callable[[int], str]]:
    """Which of ``timestamps`` (ms) are more than ``max_future_skew`` ms ahead of ``processing_time`` (ms): a
    mask of those bad records and the reason of record ``i`` (called only for the masked ones).

    A record exactly ``max_future_skew`` ahead is good. The rule guards the watermark: one corrupt far-future
    record must not push it past every window.
    """
    bad = timestamps > processing_time + max_future_skew

    def reason(i: int) -> str:
        return future_skew_reason(int(timestamps[i]), processing_time, max_future_skew)

    return bad, reason


def validate_numbers(field: str | None, values: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """An aggregate's numeric input as ``float64``, a bad-record mask and the reasons (as :func:`validate_timestamps`).

    The rule for every numeric aggregate (sum, min, max, mean), in the window operator and the map-side combine:
    a value is a number (int, float, decimal, bool, or text that parses as a float, surrounding spaces
    allowed) that is finite. Missing values (None, null, NaN) and infinities are bad records; ints beyond
    float64's range are "not finite". Integers are converted to float64 (exact up to 2**53 in magnitude):
    sums and means are IEEE doubles, as Spark's ``sum``/``avg`` over doubles, and never wrap.

    :arg field: the field's name, for the reasons (``None``: the record's value).
    :arg values: a 1-d array (any dtype; object arrays are checked value by value).
    :returns: ``(numbers, bad_mask, reasons)``; ``numbers[i]`` is NaN where ``bad_mask[i]``; ``reasons`` has
        one message per bad record, in order.
    """
    array = np.asarray(values)
    label = field_label(field)
    if array.dtype.kind in "biuf":  # the common case (Spark's columns): vectorised, no copy when all is well
        numbers = array.astype(np.float64, copy=False)
        bad = ~np.isfinite(numbers)
        if not bad.any():
            return numbers, bad, []
        reasons = [_not_finite(label, v, v) for v in numbers[bad].tolist()]
        return np.where(bad, np.nan, numbers), bad, reasons
    numbers = np.full(len(array), np.nan)
    bad = np.zeros(len(array), dtype=bool)
    reasons = []
    for i, raw in enumerate(array.tolist()):
        number, reason = _one_number(raw, label)
        if reason is None and not math.isfinite(number):
            reason = _not_finite(label, number, raw)
        if reason is None:
            numbers[i] = number
        else:
            bad[i] = True
            reasons.append(reason)
    return numbers, bad, reasons


def field_label(field: str | None) -> str:
    """How a bad record's reason names an aggregate's input: ``value`` (the record's value), else ``field`` and the
    name as Python's ``repr`` writes it (``field 'fare'``; ``field "driver's fare"``). The JVM operator takes it
    from the spec's built-in form (:func:`~floodmark.core.built_in_spec.built_in_form`), not a rule of its own."""
    return "value" if field is None else f"field {field!r}"


def _not_finite(label: str, number: float, raw: Any) -> str:
    return f"{label} is missing" if math.isnan(number) else f"{label} is not a finite number: {raw!r}"


def numeric_inputs(
    fields: list[str | None], columns: dict[str | None, Any], n: int
) -> tuple[dict[str | None, np.ndarray], np.ndarray, dict[int, str]]:
    """:func:`validate_numbers` of every numeric input field of a batch of ``n`` records.

    :returns: ``({field: float64 numbers}, bad_mask, {position: reason})``, the first field's reason winning.
    """
    numbers: dict[str | None, np.ndarray] = {}
    bad = np.zeros(n, dtype=bool)
    reasons: dict[int, str] = {}
    for name in fields:
        numbers[name], field_bad, field_reasons = validate_numbers(name, columns[name])
        for position, reason in zip(np.flatnonzero(field_bad).tolist(), field_reasons, strict=True):
            reasons.setdefault(position, reason)
        bad |= field_bad
    return numbers, bad, reasons


def _one_number(raw: Any, label: str) -> tuple[float, str | None]:
    if raw is None or raw is pd.NA:
        return math.nan, None  # missing: reported with the NaNs
    if isinstance(raw, str):
        try:
            return float(raw), None
        except ValueError:
            return math.nan, f"{label} is not a number: {raw!r}"
    if isinstance(raw, numbers.Real | decimal.Decimal | np.bool_):
        try:
            return float(raw), None
        except OverflowError:
            return math.inf, None
        except ValueError:  # Decimal('sNaN')
            pass
    return math.nan, f"{label} is not a number: {raw!r}"


@dataclass(frozen=True)
class Assigned:
    """A batch after validation, window assignment and the expiry test.

    One row per (record, live window): ``rows`` are record positions in the
    batch, ``starts``/``ends`` the windows (``[start, end)``), ``timestamps`` the
    records' event times and ``out_times`` the holds they add to those windows
    (their output times, or the combiner's empty hold: ``element_holds``);
    ``keys``, ``payload`` and ``numbers`` (the aggregate's numeric fields as validated ``float64``,
    :func:`validate_numbers`) are per record (index them with ``rows``).
    """

    keys: np.ndarray
    payload: np.ndarray
    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    timestamps: np.ndarray
    out_times: np.ndarray
    numbers: dict[str | None, np.ndarray]
    pairs: int
    """Every (record, window) pair of the batch's good records, the expired ones included."""


def late_record(
    spec: WindowSpec, watermark: int, key: Any, window: Window, timestamp: int, value: Any, reason: LateReason
) -> LateRecord:
    """A record kept out of ``window`` at ``watermark``, with how late it was and the window's horizon."""
    return LateRecord(
        key=key,
        window=window,
        timestamp=timestamp,
        value=value,
        watermark=watermark,
        lateness=watermark - timestamp,
        horizon=spec.horizon(window),
        reason=reason,
    )


def assign_batch(
    spec: WindowSpec,
    watermark: int,
    batch: RecordBatch,
    bad: list[BadRecord],
    late: list[LateRecord],
    output_watermarks: Callable[[np.ndarray], np.ndarray] | None = None,
    keep_expired: bool = False,
) -> Assigned | None:
    """Validate timestamps, assign windows and route expired pairs; ``None`` when nothing is left.

    Bad records are appended to ``bad``, expired (record, window) pairs to ``late`` (unless ``keep_expired``:
    merging windows decide lateness on the window a record merges into, :mod:`floodmark.core.window.sessions`).
    ``out_times`` are the holds the records add (``TimestampCombiner.element_holds``); ``output_watermarks(keys)``
    gives the output watermark each of ``keys`` sees as the batch arrives (``WindowTable.key_output_watermarks``;
    asked only about records whose output time is behind the watermark; None: MIN, every record holds).
    """
    n = len(batch)
    keys = as_object_array(batch.keys)
    payload = batch.payload if batch.payload is not None else batch.columns.get(None)
    payload = as_object_array(payload) if payload is not None else np.full(n, None, dtype=object)
    for name in spec.aggregate.fields:
        if name not in batch.columns:
            raise KeyError(f"the aggregate reads field {name!r}, which the batch does not have")
    timestamps, rejected, timestamp_reasons = validate_timestamps(batch.timestamps)
    numbers, invalid, reasons = numeric_inputs(spec.aggregate.numeric_fields, batch.columns, n)
    reasons.update(zip(np.flatnonzero(rejected).tolist(), timestamp_reasons, strict=True))  # a timestamp's wins
    rejected |= invalid
    if rejected.any():
        raw_timestamps = np.asarray(batch.timestamps)
        for position in np.flatnonzero(rejected).tolist():
            reason = reasons[position]
            bad.append(BadRecord(keys[position], payload[position], unwrap(raw_timestamps[position]), reason))
    good = np.flatnonzero(~rejected)
    if len(good) == 0:
        return None
    assigned = spec.window.assign(timestamps[good])
    rows = good[assigned.record_index]
    starts, ends = assigned.start, assigned.end
    row_ts = timestamps[rows]
    out_times = spec.window.output_times(row_ts, starts, ends)
    if output_watermarks is not None and spec.timestamp_combiner is not TimestampCombiner.END_OF_WINDOW:
        # Only an output time at or behind the input watermark can be at or behind its key's output watermark.
        behind = np.flatnonzero(out_times <= watermark)
        if len(behind):
            # Windows that do not overlap return the timestamps themselves as output times: a copy, so that a
            # record's event time (which late records carry) stays its own.
            out_times = out_times.copy()
            key_watermarks = output_watermarks(keys[rows[behind]])
            out_times[behind] = spec.timestamp_combiner.element_holds(out_times[behind], key_watermarks)
    expired = window_expired(ends, spec.allowed_lateness, watermark) & (not keep_expired)
    for i in np.flatnonzero(expired):
        row = rows[i]
        window = Window(int(starts[i]), int(ends[i]))
        value = unwrap(payload[row])
        late.append(late_record(spec, watermark, keys[row], window, int(row_ts[i]), value, LateReason.EXPIRED))
    live = ~expired
    if not live.any():
        return None
    pairs = len(rows)
    return Assigned(keys, payload, rows[live], starts[live], ends[live], row_ts[live], out_times[live], numbers, pairs)


def as_object_array(values: Any) -> np.ndarray:
    """``values`` as a 1-d object array (keys and payloads keep their Python values)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    array = np.empty(len(values), dtype=object)
    array[:] = list(values) if not isinstance(values, np.ndarray) else values.tolist()
    return array
