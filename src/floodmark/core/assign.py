"""A batch of records into (record, window) pairs: the input step both window operators share.

Records without a usable timestamp become bad records; (record, window) pairs
whose window the watermark has passed beyond its horizon go to the late output
(``EXPIRED``). Nothing is dropped silently.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from floodmark.core.records import BadRecord, LateReason, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.values import unwrap
from floodmark.core.windows import Window, horizon


def validate_timestamps(timestamps: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Split raw timestamps into usable ``int64`` values and a bad-record mask.

    :returns: ``(values, bad_mask, reasons)``; ``values[i]`` is meaningless where
        ``bad_mask[i]``; ``reasons`` has one message per bad record, in order.
    """
    array = np.asarray(timestamps)
    if array.dtype.kind in "iu":
        return array.astype(np.int64, copy=False), np.zeros(len(array), dtype=bool), []
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
        elif not -(2**63) <= int(raw) < 2**63:
            reason = f"timestamp out of range: {raw!r}"
        if reason is None:
            values[i] = int(raw)
        else:
            bad[i] = True
            reasons.append(reason)
    return values, bad, reasons


@dataclass(frozen=True)
class Assigned:
    """A batch after validation, window assignment and the expiry test.

    One row per (record, live window): ``rows`` are record positions in the
    batch, ``starts``/``ends`` the windows (``[start, end)``), ``timestamps`` the
    records' event times and ``out_times`` their output times in those windows;
    ``keys`` and ``payload`` are per record (index them with ``rows``).
    """

    keys: np.ndarray
    payload: np.ndarray
    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    timestamps: np.ndarray
    out_times: np.ndarray


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
    spec: WindowSpec, watermark: int, batch: RecordBatch, bad: list[BadRecord], late: list[LateRecord]
) -> Assigned | None:
    """Validate timestamps, assign windows and route expired pairs; ``None`` when nothing is left.

    Bad records are appended to ``bad``, expired (record, window) pairs to ``late``.
    """
    n = len(batch)
    keys = as_object_array(batch.keys)
    payload = batch.payload if batch.payload is not None else batch.columns.get(None)
    payload = as_object_array(payload) if payload is not None else np.full(n, None, dtype=object)
    for name in spec.aggregate.fields:
        if name not in batch.columns:
            raise KeyError(f"the aggregate reads field {name!r}, which the batch does not have")
    timestamps, rejected, reasons = validate_timestamps(batch.timestamps)
    if rejected.any():
        raw_timestamps = np.asarray(batch.timestamps)
        for position, reason in zip(np.flatnonzero(rejected), reasons, strict=True):
            bad.append(BadRecord(keys[position], payload[position], unwrap(raw_timestamps[position]), reason))
    good = np.flatnonzero(~rejected)
    if len(good) == 0:
        return None
    assigned = spec.window.assign(timestamps[good])
    rows = good[assigned.record_index]
    starts, ends = assigned.start, assigned.end
    row_ts = timestamps[rows]
    out_times = spec.window.output_times(row_ts, starts, ends)
    expired = horizon(ends, spec.allowed_lateness) <= watermark
    for i in np.flatnonzero(expired):
        row = rows[i]
        window = Window(int(starts[i]), int(ends[i]))
        value = unwrap(payload[row])
        late.append(late_record(spec, watermark, keys[row], window, int(row_ts[i]), value, LateReason.EXPIRED))
    live = ~expired
    if not live.any():
        return None
    return Assigned(keys, payload, rows[live], starts[live], ends[live], row_ts[live], out_times[live])


def as_object_array(values: Any) -> np.ndarray:
    """``values`` as a 1-d object array (keys and payloads keep their Python values)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    array = np.empty(len(values), dtype=object)
    array[:] = list(values) if not isinstance(values, np.ndarray) else values.tolist()
    return array
