"""When a query's input ends: the one-way latch that gives every source watermark MAX (every window fires).

Three ways to end it: :meth:`EndOfInput.now` (at the next batch, whatever the sources still have); a bounded run's
:meth:`EndOfInput.when` ``exhausted`` (the first batch the engine planned to read nothing, or after the first batch
that read nothing, if ``exhausted()`` also says so then); and :meth:`EndOfInput.when_requested`, the same from the
first batch that begins once ``requested()`` is true (a Spark Connect client's request, a file in the checkpoint).
Once ended, never taken back.

The first batch of a (re)started query says nothing about the input: it may replay offsets planned before a
restart, when newer input did not exist yet, so reading nothing there is not the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class FirstBatch(Protocol):
    """What the engine says of a run's batches (:class:`~floodmark.driver.controller.EngineHooks`)."""

    @property
    def first_batch_id(self) -> int: ...

    @property
    def reads_no_new_input(self) -> Callable[[int], bool]: ...


class EndOfInput:
    """Whether a query's input has ended, and when a batch ends it (see the module docstring).

    :arg engine: what the engine says of this run's batches. :arg earlier: the latch of an earlier run of the same
        query in this process (started again after a failure): its conditions carry over, not its decision.
    """

    def __init__(self, engine: FirstBatch, earlier: EndOfInput | None = None) -> None:
        self.engine = engine
        self.exhausted: Callable[[], bool] | None = earlier.exhausted if earlier is not None else None
        """A bounded run's condition (:meth:`when`), None while the run is not bounded."""
        self.on_request: tuple[Callable[[], bool], Callable[[], bool]] | None = (
            earlier.on_request if earlier is not None else None
        )
        self.ended = False
        """The latch: the next batch's sources get watermark MAX."""
        self._first_begun: int | None = None

    def now(self) -> None:
        """End the input at the next batch."""
        self.ended = True

    def when(self, exhausted: Callable[[], bool]) -> None:
        """End the input at the first batch the engine planned to read nothing (:meth:`begins_at_end`), or after the
        first batch that read nothing (:meth:`after_batch`), if ``exhausted()`` also says so then."""
        self.exhausted = exhausted

    def when_requested(self, requested: Callable[[], bool], exhausted: Callable[[], bool]) -> None:
        """:meth:`when` ``exhausted``, from the first batch that begins once ``requested()`` is true."""
        self.on_request = (requested, exhausted)

    @property
    def bounded(self) -> bool:
        """Whether the input ends or may end by itself (a bounded run, or ended already)."""
        return self.exhausted is not None or self.ended

    @property
    def first_batch_id(self) -> int:
        """The first batch of this run: the first :meth:`begin` saw, else what the engine said."""
        return self.engine.first_batch_id if self._first_begun is None else self._first_begun

    def begin(self, batch_id: int) -> None:
        """Batch ``batch_id`` begins: the first of this run is remembered, a pending request becomes the condition."""
        if self._first_begun is None:
            self._first_begun = batch_id
        if self.exhausted is None and self.on_request is not None and self.on_request[0]():
            self.exhausted = self.on_request[1]

    def begins_at_end(self, batch_id: int, entry_ends: bool) -> bool:
        """Whether batch ``batch_id`` (after :meth:`begin`), whose entry does not end the input already
        (``entry_ends`` false), is the end itself: a bounded run's batch that the engine planned to read no new
        input, other than the run's first, when ``exhausted()`` says so too. Latches."""
        if (
            self.exhausted is not None
            and not entry_ends
            and batch_id > self.first_batch_id
            and self.engine.reads_no_new_input(batch_id)
            and bool(self.exhausted())
        ):
            self.ended = True
            return True
        return False

    def after_batch(self, batch_id: int, records: int, bad: int) -> bool:
        """Whether the next batch gets the end of input, after batch ``batch_id`` read ``records`` good records and
        ``bad`` dead letters (decided before entry N+1 is written, so the flush is the very next batch). Latches."""
        read_nothing = records == 0 and not bad and batch_id > self.first_batch_id
        if self.exhausted is not None and read_nothing and not self.ended:
            self.ended = bool(self.exhausted())
        return self.ended
