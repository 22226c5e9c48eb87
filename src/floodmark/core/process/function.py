"""What a keyed process function is: your class (the protocol) and what it sees (the context).

A keyed process function (Flink's ``KeyedProcessFunction``, Beam's stateful ``DoFn`` with timers, Spark's
``StatefulProcessor``) gets every record of a key with that key's state, and can ask to be called back at an event
time or a processing time. The rules, all in ms:

* **event-time timers** fire when the stage's input watermark ``W >= t`` (Flink's ``InternalTimerServiceImpl``,
  the boundary a window's max timestamp has), in timestamp order, then key order of registration; a timer a
  record sets at or behind the watermark fires at the watermark's next move (Flink's: on Spark, at the start of
  the next batch, which the driver asks for at once), one a timer callback sets within reach fires in the same
  move;
* **processing-time timers** fire when the batch's processing time reaches ``t``;
* one timer per (key, domain, time): setting it again changes nothing, deleting it cancels it;
* **output times and holds** (Beam's timers): every timer has an output time, the event time of what its callback
  emits: an event-time timer's own time unless set with an earlier ``output_time`` (an absence alert timed at the
  last record, not at the end of the silence); a processing-time timer's, the event time of the call that set it.
  A pending timer holds the stage's output watermark below its output time, so those rows are on time downstream.
  A row emitted while handling a record carries the record's event time. :meth:`ProcessContext.emit` can be
  given another time; a row timed at or behind the stage's output watermark is late downstream (nothing
  holds for it);
* records behind the watermark are handed to the function like any other (``ctx.watermark`` says where it is):
  only the function knows what late means for it.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class TimeDomain(enum.StrEnum):
    """The clock a timer follows."""

    EVENT_TIME = "EVENT_TIME"
    PROCESSING_TIME = "PROCESSING_TIME"


@dataclass(frozen=True, order=True)
class Timer:
    """A timer that fired: its time (ms) in its domain, and the event time its callback's rows carry."""

    time: int
    domain: TimeDomain
    output_time: int


class ProcessContext(Protocol):
    """What a keyed process function sees in a call.

    :ivar key: the key of the record or timer. :ivar state: the key's state, a dict of picklable values that
        lives across batches and restarts (empty for a new key; clear it to forget the key).
    :ivar timestamp: the record's event time, or the timer's time (ms). :ivar watermark: the stage's input
        watermark (ms). :ivar processing_time: the batch's processing time (ms).
    """

    key: Hashable
    state: MutableMapping[str, Any]
    timestamp: int
    watermark: int
    processing_time: int

    def emit(self, row: Any, timestamp: int | None = None) -> None:
        """Output ``row`` at ``timestamp`` (default: the record's event time, or the timer's output time)."""
        ...

    def set_event_timer(self, time: int, output_time: int | None = None) -> None:
        """Be called back when the watermark reaches ``time``; rows emitted then carry ``output_time`` (default
        ``time``; not after it), which holds the stage's output watermark until then."""
        ...

    def delete_event_timer(self, time: int) -> None: ...

    def set_processing_timer(self, time: int, output_time: int | None = None) -> None:
        """Be called back when processing time reaches ``time``; rows emitted then carry ``output_time`` (default:
        this call's event time), which holds the stage's output watermark until then."""
        ...

    def delete_processing_timer(self, time: int) -> None: ...

    def event_timers(self) -> list[int]:
        """The key's pending event-time timers, ascending."""
        ...


@runtime_checkable
class KeyedProcessFunction(Protocol):
    """Your code: called with each record of a key, and with each of the key's timers that fires."""

    def process(self, record: Any, ctx: ProcessContext) -> None: ...

    def on_timer(self, timer: Timer, ctx: ProcessContext) -> None: ...
