"""Event time and processing time as integer milliseconds.

Every timestamp in floodmark is an ``int`` of milliseconds since the Unix epoch
(UTC), for event time and processing time alike. Durations are ``int``
milliseconds too; every public function that takes a duration also accepts a
:class:`datetime.timedelta` and converts it with :func:`to_millis`.

``MIN_TIMESTAMP`` and ``MAX_TIMESTAMP`` are Java's ``Long.MIN_VALUE`` and
``Long.MAX_VALUE``, the bottom and top of a watermark as in Flink: a watermark of
``MIN_TIMESTAMP`` promises nothing, a watermark of ``MAX_TIMESTAMP`` says the
input is complete (end of a bounded input).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

MIN_TIMESTAMP: int = -(2**63)
MAX_TIMESTAMP: int = 2**63 - 1

Duration = int | timedelta
"""A duration: ``int`` milliseconds or a :class:`datetime.timedelta`."""


def to_millis(duration: Duration) -> int:
    """Return ``duration`` as integer milliseconds.

    :arg duration: ``int`` milliseconds or a :class:`datetime.timedelta`
        (sub-millisecond parts are truncated toward zero, like Java's
        ``Duration.toMillis``).
    :raises TypeError: for anything else (``float`` is refused on purpose: a
        float of seconds passed where milliseconds are meant is a common bug).
    """
    if isinstance(duration, bool):
        raise TypeError("a duration must be int milliseconds or a timedelta, not bool")
    if isinstance(duration, int):
        return duration
    if isinstance(duration, timedelta):
        # Integer arithmetic: timedelta.total_seconds() is a float and loses precision.
        micros = (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds
        return int(micros / 1000) if micros < 0 else micros // 1000
    raise TypeError(f"a duration must be int milliseconds or a datetime.timedelta, got {type(duration).__name__}")


def non_negative_millis(duration: Duration, name: str) -> int:
    """:func:`to_millis`, refusing negative values with a message naming ``name``."""
    millis = to_millis(duration)
    if millis < 0:
        raise ValueError(f"{name} must not be negative, got {millis} ms")
    return millis


def positive_millis(duration: Duration, name: str) -> int:
    """:func:`to_millis`, refusing zero and negative values with a message naming ``name``."""
    millis = to_millis(duration)
    if millis <= 0:
        raise ValueError(f"{name} must be greater than zero, got {millis} ms")
    return millis


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
        instant = datetime.fromtimestamp(timestamp / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(timestamp)
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")
