"""Records that do not end in a pane: late records and bad records. Nothing is dropped silently."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from floodmark.core.windows import Window


class LateReason(enum.StrEnum):
    """Why a record did not enter its window."""

    EXPIRED = "EXPIRED"
    """The watermark had passed the window's max timestamp + allowed lateness."""

    WINDOW_CLOSED = "WINDOW_CLOSED"
    """The window's trigger had finished (e.g. ``AfterWatermark()`` without late firings)."""


@dataclass(frozen=True)
class LateRecord:
    """A record kept out of one of its windows.

    :ivar lateness: ``watermark - timestamp`` in ms at arrival: how far behind the
        watermark the record was. :ivar horizon: the window's cleanup time,
        ``max_timestamp + allowed_lateness``; the record was expired when
        ``horizon <= watermark``.
    """

    key: Any
    window: Window
    timestamp: int
    value: Any
    watermark: int
    lateness: int
    horizon: int
    reason: LateReason


@dataclass(frozen=True)
class BadRecord:
    """A record that could not be processed, with the reason (the dead-letter output)."""

    key: Any
    value: Any
    raw_timestamp: Any
    reason: str


@dataclass(frozen=True)
class RecordBatch:
    """A batch of records for the window operator, as columns (one row per record).

    :ivar keys: 1-d array of hashable keys (dtype object, or any numpy dtype).
    :ivar timestamps: 1-d array of event times in ms; ``int64`` when every record
        has one, otherwise dtype object or float with ``None``/``NaN`` for records
        without a usable timestamp (those become bad records).
    :ivar columns: the aggregate inputs, ``{field: array}``; field ``None`` is the
        record's value.
    :ivar payload: what late and bad records carry as ``value`` (the record
        itself in the harness, a row position on Spark); defaults to
        ``columns[None]`` when present.
    """

    keys: Any
    timestamps: Any
    columns: dict[str | None, Any]
    payload: Any = None

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_elements(cls, elements: Any, key: Any = None, fields: Any = ()) -> RecordBatch:
        """A batch of one key from ``(value, timestamp)`` pairs.

        :arg fields: record fields the aggregates read (``value[field]``), besides
            the value itself.
        """
        import numpy as np

        pairs = list(elements)
        n = len(pairs)

        def column(items: list[Any]) -> np.ndarray:
            array = np.empty(n, dtype=object)
            array[:] = items
            return array

        values = column([value for value, _ in pairs])
        raw = [ts for _, ts in pairs]
        if all(isinstance(ts, int) and not isinstance(ts, bool) for ts in raw):
            timestamps: np.ndarray = np.array(raw, dtype=np.int64)
        else:
            timestamps = column(raw)
        columns: dict[str | None, Any] = {None: values}
        for name in fields:
            if name is not None:
                columns[name] = column([value[name] for value in values])
        return cls(column([key] * n), timestamps, columns)
