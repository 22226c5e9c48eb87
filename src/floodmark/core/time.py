"""Event time and processing time as integer milliseconds: arithmetic, formatting and parsing.

Every timestamp in floodmark is an ``int`` of milliseconds since the Unix epoch
(UTC), for event time and processing time alike. Durations are ``int``
milliseconds too; every public function that takes a duration also accepts a
:class:`datetime.timedelta` or text with a unit (Spark's interval strings,
``"5 minutes"``, or short forms, ``"5m"``: :func:`parse_duration`; ``"5"`` is
refused, an ``int`` is ms) and converts it with :func:`to_millis`.

``MIN_TIMESTAMP`` and ``MAX_TIMESTAMP`` are Java's ``Long.MIN_VALUE`` and
``Long.MAX_VALUE``, the bottom and top of a watermark as in Flink: a watermark of
``MIN_TIMESTAMP`` promises nothing, a watermark of ``MAX_TIMESTAMP`` says the
input is complete (end of a bounded input).

Records live in a narrower range, :data:`EARLIEST_EVENT_TIME` ..
:data:`LATEST_EVENT_TIME` (0001-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z,
Spark's documented ``TIMESTAMP`` range and Python's ``datetime``'s), and every
duration (window size, slide, gap, allowed lateness, out-of-orderness, delays)
is at most :data:`MAX_DURATION` (the width of that range, ~10,000 years). Why:
with both bounds, every sum the engine forms (a window's end, ``end - 1 +
allowed_lateness``, ``max_ts - bound``) stays below 2**50 in magnitude, so int64
arithmetic (numpy's, Java's) never wraps and every window bound is a valid Spark
timestamp (microseconds, x1000). A record outside the range is a bad record (the
dead-letter output, with the reason), never a window.

Every conversion between milliseconds and text lives here: ISO instants
(:func:`format_timestamp`, :func:`format_instant`, :func:`parse_instant`),
durations (:func:`format_duration`, :func:`format_seconds`,
:func:`parse_duration`) and the clickstream job's ``yyyyMMddHHmmss`` (:func:`format_compact`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

MIN_TIMESTAMP: int = -(2**63)
MAX_TIMESTAMP: int = 2**63 - 1

EARLIEST_EVENT_TIME: int = -62_135_596_800_000
"""0001-01-01T00:00:00.000Z: the earliest event time a record may carry (inclusive)."""
LATEST_EVENT_TIME: int = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest event time a record may carry (inclusive)."""
MAX_DURATION: int = LATEST_EVENT_TIME - EARLIEST_EVENT_TIME
"""The longest duration anything may be configured with, in ms (~10,000 years; see the module docstring)."""

Duration = int | timedelta | str
"""A duration: ``int`` milliseconds, a :class:`datetime.timedelta`, or text such as ``"5 minutes"`` or ``"50s"``
(:func:`parse_duration`)."""


def to_millis(duration: Duration) -> int:
    """Return ``duration`` as integer milliseconds.

    :arg duration: ``int`` milliseconds, a :class:`datetime.timedelta`
        (sub-millisecond parts are truncated toward zero, like Java's
        ``Duration.toMillis``) or text (:func:`parse_duration`).
    :raises TypeError: for anything else (``float`` is refused on purpose: a
        float of seconds passed where milliseconds are meant is a common bug).
    :raises ValueError: text that is not a duration.
    """
    if isinstance(duration, bool):
        raise TypeError("a duration must be int milliseconds or a timedelta, not bool")
    if isinstance(duration, int):
        return duration
    if isinstance(duration, str):
        return parse_duration(duration)
    if isinstance(duration, timedelta):
        # Integer arithmetic: timedelta.total_seconds() is a float and loses precision.
        micros = (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds
        return int(micros / 1000) if micros < 0 else micros // 1000
    raise TypeError(
        f"a duration must be int milliseconds, a datetime.timedelta or text such as '5 minutes', "
        f"got {type(duration).__name__}"
    )


def non_negative_millis(duration: Duration, name: str) -> int:
    """:func:`to_millis`, refusing negative values and values above :data:`MAX_DURATION` with a message naming
    ``name``."""
    millis = to_millis(duration)
    if millis < 0:
        raise ValueError(f"{name} must not be negative, got {millis} ms")
    return _at_most_max_duration(millis, name)


def positive_millis(duration: Duration, name: str) -> int:
    """:func:`to_millis`, refusing zero, negative values and values above :data:`MAX_DURATION` with a message
    naming ``name``."""
    millis = to_millis(duration)
    if millis <= 0:
        raise ValueError(f"{name} must be greater than zero, got {millis} ms")
    return _at_most_max_duration(millis, name)


def _at_most_max_duration(millis: int, name: str) -> int:
    if millis > MAX_DURATION:
        raise ValueError(
            f"{name} must be at most {MAX_DURATION} ms (~10,000 years, the supported event-time range), got {millis} ms"
        )
    return millis


def event_time_in_range(timestamps: Any) -> Any:
    """Is each timestamp (an int or an ``int64`` array, ms) within [EARLIEST_EVENT_TIME, LATEST_EVENT_TIME]?"""
    return (timestamps >= EARLIEST_EVENT_TIME) & (timestamps <= LATEST_EVENT_TIME)


def out_of_range_reason(timestamp: int) -> str:
    """The dead-letter reason for a record whose event time is outside the supported range."""
    return (
        f"timestamp {timestamp} ms is outside the supported event-time range "
        f"[{EARLIEST_EVENT_TIME}, {LATEST_EVENT_TIME}] (0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z)"
    )


def future_skew_reason(timestamp: int, processing_time: int, max_future_skew: int) -> str:
    """The dead-letter reason for a record more than ``max_future_skew`` (ms) ahead of ``processing_time``: each
    time in ms and as ISO-8601 UTC, the skew as a duration (and in ms from a second up). The JVM host writes the
    same text (``RecordRules`` in floodmark's jar)."""
    skew = format_duration(max_future_skew)
    if max_future_skew >= _SECOND:
        skew += f" ({max_future_skew} ms)"
    return (
        f"timestamp {timestamp} ({_event_time_text(timestamp)}) is more than {skew} ahead of processing time "
        f"{processing_time} ({_event_time_text(processing_time)})"
    )


def _event_time_text(ms: int) -> str:
    """ISO-8601 UTC to the ms, or which side of the supported event-time range ``ms`` is on."""
    if ms > LATEST_EVENT_TIME:
        return f"after {format_timestamp(LATEST_EVENT_TIME)}"
    if ms < EARLIEST_EVENT_TIME:
        return f"before {format_timestamp(EARLIEST_EVENT_TIME)}"
    return format_timestamp(ms)


def saturating_add(timestamp: int, duration: int) -> int:
    """``timestamp + duration`` clamped to [MIN_TIMESTAMP, MAX_TIMESTAMP].

    Used for horizons such as ``max_timestamp + allowed_lateness`` of the global
    window, which would overflow Java's ``long`` (and numpy's ``int64``).
    """
    return max(MIN_TIMESTAMP, min(MAX_TIMESTAMP, timestamp + duration))


def format_timestamp(timestamp: int) -> str:
    """Human-readable form of a millisecond timestamp (UTC, ISO 8601), or MIN/MAX."""
    if timestamp <= MIN_TIMESTAMP:
        return "MIN"
    if timestamp >= MAX_TIMESTAMP:
        return "MAX"
    try:
        instant = _EPOCH + timedelta(milliseconds=int(timestamp))  # exact: timestamp / 1000, a float, was off by 1 ms
    except OverflowError:
        return str(timestamp)
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_watermark(ms: int | None) -> str:
    """A watermark or event time for live displays: UTC ISO time, ``MIN (no data)``, ``MAX (end)``; ``-`` for None."""
    if ms is None:
        return "-"
    if ms <= MIN_TIMESTAMP:
        return "MIN (no data)"
    if ms >= MAX_TIMESTAMP:
        return "MAX (end)"
    return format_timestamp(ms)


def format_instant(ms: int) -> str:
    """``2024-01-01T11:59:59.999Z``, exact to the millisecond (each time once in explanations); ``MIN`` / ``MAX``
    for the extremes."""
    if ms <= MIN_TIMESTAMP:
        return "MIN"
    if ms >= MAX_TIMESTAMP:
        return "MAX"
    return format_timestamp(ms)


def format_compact(ms: int) -> str:
    """``yyyyMMddHHmmss`` in UTC (the clickstream job's output format)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y%m%d%H%M%S")


_DAY, _HOUR, _MINUTE, _SECOND = 86_400_000, 3_600_000, 60_000, 1_000
_UNBOUNDED = 10**15  # ~31 700 years: a gap measured from MIN_TIMESTAMP, not a real duration


def format_duration(ms: int) -> str:
    """``1 min 10.5 s``, ``250 ms``: exact to the millisecond; ``unbounded`` for gaps measured from MIN."""
    if abs(ms) >= _UNBOUNDED:
        return "unbounded"
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    if rest < _SECOND:
        return f"{sign}{rest} ms"
    parts = []
    for size, unit in ((_DAY, "d"), (_HOUR, "h"), (_MINUTE, "min")):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}")
    seconds, millis = divmod(rest, _SECOND)
    if millis:
        parts.append(f"{seconds}.{millis:03d}".rstrip("0") + " s")
    elif seconds:
        parts.append(f"{seconds} s")
    return f"{sign}{' '.join(parts)}"


def format_relative(at: int, now: int) -> str:
    """``in 1.5 s``, ``2 s ago`` or ``now``: ``at`` seen from ``now`` (both ms)."""
    if at == now:
        return "now"
    return f"in {format_duration(at - now)}" if at > now else f"{format_duration(now - at)} ago"


def format_seconds(ms: int | None) -> str:
    """A short, rounded duration for live displays: ``12.5 s``, ``15.2 min``; ``-`` for None."""
    if ms is None:
        return "-"
    seconds = ms / 1000
    return f"{seconds:,.1f} s" if abs(seconds) < 600 else f"{seconds / 60:,.1f} min"


_UNITS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86_400_000),
}
_PART = re.compile(r"(\d+)\s*([a-z]*)")
_DURATION = re.compile(r"^(?:interval\s+)?(?:\d+\s*[a-z]*\s*)+$")


DURATION_FORMS = "text with a unit ('30 seconds', '30s', '500 ms', '1 minute 30 seconds'), an int of ms or a timedelta"
"""The forms a duration is given in, as error messages name them."""


def parse_duration(value: Any) -> int:
    """Milliseconds from an int (ms), or numbers with units, Spark's interval strings among them:
    ``"5 minutes"``, ``"1 minute 30 seconds"``, ``"interval 2 hours"``, ``"50s"``, ``"1m"``, ``"250ms"``, ``"2h"``.

    Units: ms, s, m (minutes), h, d, w, and their names (``millisecond(s)``, ``sec(s)``, ``second(s)``,
    ``min(s)``, ``minute(s)``, ``hour(s)``, ``day(s)``, ``week(s)``), any case. Text without a unit (``"30"``)
    is refused: seconds or milliseconds, it cannot tell (an ``int`` is ms). Months and years are refused too:
    their length varies.

    :raises ValueError: for negative numbers, a number without a unit, other units or anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} (use {DURATION_FORMS})")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value}")
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if _DURATION.match(text):
            parts = _PART.findall(text.removeprefix("interval"))
            if all(unit in _UNITS for _, unit in parts):
                return sum(int(number) * _UNITS[unit] for number, unit in parts)
            if all(unit in _UNITS or unit == "" for _, unit in parts):
                raise ValueError(
                    f"not a duration: {value!r} has a number without a unit (seconds? milliseconds?): use "
                    f"{DURATION_FORMS}"
                )
    raise ValueError(f"not a duration: {value!r} (use {DURATION_FORMS})")


_ZONE_SUFFIX = re.compile(
    r"^(?P<time>.*\d)\s*(?:(?:UTC|GMT|UT)(?P<offset>[+-]\d{1,2}(?::?\d{2})?)?|(?P<zone>[A-Za-z]+/[A-Za-z0-9_/+-]+))$"
)


def event_time_of(value: Any, time_zone: str = "UTC") -> int | None:
    """A record's event time in ms by the rules the Spark runtime applies to an event-time column
    (``floodmark.spark.sources.inputs.event_time_ms``), for tools that read records without Spark (``floodmark
    advise``);
    None where the runtime would make the record a dead letter.

    ints are ms; whole floats are ms; ``datetime`` values are instants (naive ones are wall-clock times in
    ``time_zone``); text is ms (digits) or an ISO-8601 date-time (``2026-01-01T10:00:00.123+01:00``,
    ``2026-01-01 10:00:00Z``, ``2026-01-01``, ``2026-01-01T10:00:00 Europe/Berlin``) whose offset or zone is kept,
    a wall-clock time in ``time_zone`` without one.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if MIN_TIMESTAMP <= value <= MAX_TIMESTAMP else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else None
    if isinstance(value, datetime):
        return _instant_ms(value, time_zone)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return event_time_of(int(text), time_zone)
    zone = time_zone
    named = _ZONE_SUFFIX.match(text)
    if named:  # a zone name or UTC[+-hh[:mm]] after the time: as an IANA zone, or as an ISO offset
        text, zone = named.group("time"), named.group("zone") or "UTC"
        offset = named.group("offset")
        if offset:
            hours, _, minutes = offset[1:].partition(":") if ":" in offset else (offset[1:3], "", offset[3:])
            text += f"{offset[0]}{int(hours):02d}:{int(minutes or 0):02d}"
    try:
        return _instant_ms(datetime.fromisoformat(text), zone)
    except (ValueError, KeyError, OverflowError):
        return None


def _instant_ms(moment: datetime, time_zone: str) -> int:
    """Milliseconds since the epoch of ``moment``, a naive one read as a wall-clock time in ``time_zone``."""
    from zoneinfo import ZoneInfo  # imported here: only the tools that read records need time zones

    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(time_zone))
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_instant(value: str) -> int:
    """Milliseconds since the epoch from digits (ms) or an ISO-8601 date-time (UTC unless it names a zone).

    :raises ValueError: for anything else.
    """
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is neither ms nor an ISO date-time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
