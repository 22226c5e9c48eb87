"""The source watermark coordinator: per-split generators, idleness, MIN-combining.

:class:`SourceWatermarks` is what Flink spreads over its source readers: one
generator per split (created from the :class:`WatermarkStrategy` when the split
first appears), periodic emission every ``periodic_interval`` of processing
time, idleness through the injected clock, and a :class:`WatermarkMultiplexer`
that combines the splits. It is engine-free; the Spark runtime runs it on the
driver between micro-batches and snapshots it with the batch id.

Two ways to feed it:

* event at a time: :meth:`SourceWatermarks.on_event` per record;
* micro-batch: :meth:`SourceWatermarks.on_batch` with one
  :class:`SplitBatchStats` per split that had records in the batch (see
  :mod:`floodmark.core.watermarks.generator` for what a generator sees then;
  every known split hears of every batch, with a count of 0 when it had none).

Then :meth:`SourceWatermarks.advance_processing_time` runs the periodic emits:
one ``on_periodic_emit`` per split for every ``periodic_interval`` boundary
crossed since the last call (so a 1 s micro-batch with the default 200 ms
interval calls it five times, as Flink would have over that second), at most
``max_periodic_catch_up`` times per call so that a long pause (a restart after
downtime) does not spin; the idleness clock is set to each boundary in turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from floodmark.core.clock import ManualClock
from floodmark.core.time import Duration, positive_millis
from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.core.watermarks.generator import WatermarkGenerator
from floodmark.core.watermarks.idleness import without_idleness
from floodmark.core.watermarks.multiplexer import WatermarkMultiplexer
from floodmark.core.watermarks.strategy import WatermarkStrategy


class SourceWatermarks:
    """The watermark of one source made of splits.

    :arg strategy: builds each split's generator.
    :arg periodic_interval: Flink's auto-watermark interval (ms or timedelta), default 200.
    :arg percentile: combine by MIN (100, default) or so that this % of active splits reached it.
    :arg splits: splits known in advance; they hold the watermark back from the start.
    :arg start_processing_time: processing time (ms) at creation.
    """

    def __init__(
        self,
        strategy: WatermarkStrategy,
        periodic_interval: Duration = 200,
        percentile: float = 100.0,
        splits: Iterable[str] = (),
        start_processing_time: int = 0,
        max_periodic_catch_up: int = 1000,
    ) -> None:
        self.strategy = strategy
        self.periodic_interval = positive_millis(periodic_interval, "the periodic interval")
        self.max_periodic_catch_up = max_periodic_catch_up
        self.clock = ManualClock(start_processing_time)
        self.last_periodic = start_processing_time
        self.multiplexer = WatermarkMultiplexer(percentile)
        self.generators: dict[str, WatermarkGenerator] = {}
        for split in splits:
            self._generator(str(split))

    # ------------------------------------------------------------ feeding
    def on_event(self, split: str, event: Any, timestamp: int) -> None:
        """One record of ``split`` with its timestamp (ms)."""
        split = str(split)
        self._generator(split).on_event(event, timestamp, self.multiplexer.register(split))
        self.multiplexer.update_combined()

    def on_batch(self, stats: Iterable[SplitBatchStats]) -> None:
        """The statistics of one micro-batch, one entry per split that had records.

        Every known split's generator hears of the batch: those without an entry get
        ``SplitBatchStats(split, 0)`` (a batch without their records: idleness counts from there).
        """
        entries = {str(entry.split): entry for entry in stats}
        for split in [*self.generators, *(s for s in entries if s not in self.generators)]:
            entry = entries.get(split, SplitBatchStats(split, 0))
            self._generator(split).on_batch(entry, self.multiplexer.register(split))
        self.multiplexer.update_combined()

    def advance_processing_time(self, now: int) -> int:
        """Run the periodic emits due up to processing time ``now``; returns the watermark."""
        ticks = (now - self.last_periodic) // self.periodic_interval
        if ticks <= 0:
            self.clock.advance_to(now)
            return self.watermark
        skipped = max(0, ticks - self.max_periodic_catch_up)
        for tick in range(skipped + 1, ticks + 1):
            self.clock.advance_to(self.last_periodic + tick * self.periodic_interval)
            for split, generator in self.generators.items():
                generator.on_periodic_emit(self.multiplexer.register(split))
        self.last_periodic += ticks * self.periodic_interval
        self.clock.advance_to(now)
        return self.multiplexer.update_combined()

    def reaches(self, target: int, within: int) -> int | None:
        """The earliest processing time (ms), at most ``within`` ms after now, at which the watermark reaches
        ``target`` if no record arrives meanwhile (periodic emits and idleness run on processing time), or None.

        Probes a copy one periodic interval at a time (Flink's auto-watermark ticks) after an empty batch (the
        next batches read nothing: idleness counts from there); this coordinator is left as it is. An idle
        query uses it to sleep until the watermark can fire something.
        """
        if self.watermark >= target:
            return self.clock.now_ms()
        twin = self.copy()
        twin.on_batch([])
        moment, limit = self.last_periodic, self.clock.now_ms() + within
        while moment + self.periodic_interval <= limit:
            moment += self.periodic_interval
            if twin.advance_processing_time(moment) >= target:
                return moment
        return None

    def register_split(self, split: str) -> None:
        """Declare a split before its first record (it holds the watermark back from now on)."""
        self._generator(str(split))

    # ------------------------------------------------------------ reading
    @property
    def watermark(self) -> int:
        """The combined watermark (ms): MIN (or percentile) over non-idle splits; never regresses."""
        return self.multiplexer.watermark

    @property
    def idle(self) -> bool:
        """True when every known split is idle."""
        return self.multiplexer.idle

    def split_watermarks(self) -> dict[str, tuple[int, bool]]:
        """``{split: (watermark, idle)}`` for every known split."""
        return {s: (o.watermark, o.idle) for s, o in self.multiplexer.outputs.items()}

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> dict[str, Any]:
        """Everything needed to resume: generators, split outputs, clock and periodic phase."""
        return {
            "generators": {split: g.snapshot() for split, g in self.generators.items()},
            "multiplexer": self.multiplexer.snapshot(),
            "clock": self.clock.now_ms(),
            "last_periodic": self.last_periodic,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`snapshot`, taken under this strategy or another: the strategy's settings (bound,
        idleness, periodic interval, percentile) are this coordinator's; each split keeps what its generator has seen
        and its watermark (:mod:`~floodmark.core.watermarks.generator`, "Settings changed on a running job")."""
        self.clock = ManualClock(state["clock"])
        self.generators = {}
        for split, saved in state["generators"].items():
            if self.strategy.idle_timeout_ms is None:  # idleness removed since the snapshot: the generator's part
                saved = without_idleness(saved)
            self._generator(split).restore(saved)
        self.multiplexer.restore(state["multiplexer"])
        self.last_periodic = state["last_periodic"]

    def copy(self) -> SourceWatermarks:
        """An independent copy in the same state (same strategy; snapshot and restore)."""
        twin = SourceWatermarks(
            self.strategy,
            periodic_interval=self.periodic_interval,
            percentile=self.multiplexer.percentile,
            start_processing_time=self.clock.now_ms(),
            max_periodic_catch_up=self.max_periodic_catch_up,
        )
        twin.restore(self.snapshot())
        return twin

    def _generator(self, split: str) -> WatermarkGenerator:
        generator = self.generators.get(split)
        if generator is None:
            generator = self.generators[split] = self.strategy.create_generator(self.clock)
            self.multiplexer.register(split)
        return generator
