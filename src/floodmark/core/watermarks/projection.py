"""What a source's watermark does if no record arrives: the coordinator itself, run forward on a copy.

``floodmark explain`` answers "when does this window fire if nothing else
arrives?" by running a restored copy of the source's
:class:`~floodmark.core.watermarks.SourceWatermarks` forward one periodic
interval at a time, with no records: the generators' own ``on_periodic_emit``,
Flink's idleness timers and the MIN (or percentile) combining decide, exactly
as they will in the real run. Nothing here models a generator.

The look-ahead is bounded: at most ``max_ticks`` periodic intervals (default
20,000: 66 min of processing time at Flink's 200 ms, ~0.1 s of work at most);
an event beyond it is reported as never. The run stops early once every
question is answered, or when nothing can change any more (a stretch of ticks
left the generators and outputs unchanged and no idleness timer is running).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from floodmark.core.watermarks.coordinator import SourceWatermarks

MAX_TICKS = 20_000
_CHUNK = 1_024  # ticks run in one call between checks


@dataclass
class SplitProjection:
    """One split's future without records (processing times in ms).

    :ivar next_emit: its watermark after the next periodic emit, when that is higher than now (records it
        already has, or a generator that advances on its own).
    :ivar idle_at: when it is marked idle (``None``: already idle, no idleness, or beyond the look-ahead).
    :ivar reaches_at: ``{target: when its watermark reaches it}`` before it is marked idle (a split already
        there: the last periodic tick; never: absent).
    """

    next_emit: int | None = None
    idle_at: int | None = None
    reaches_at: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Projection:
    """The source's future without records.

    :ivar next_tick: processing time of the next periodic emit.
    :ivar combined_reaches_at: ``{target: when the combined watermark reaches it}`` (already there or never:
        absent). :ivar splits: per split.
    """

    next_tick: int
    combined_reaches_at: dict[int, int]
    splits: dict[str, SplitProjection]


def project(source: SourceWatermarks, targets: Iterable[int], max_ticks: int = MAX_TICKS) -> Projection:
    """Run a copy of ``source`` forward without records; when does each watermark reach each target?

    ``source`` is not changed.
    """
    targets = sorted(set(targets))
    sim = source.copy()
    sim.on_batch(())  # from now on no split has records (in micro-batch mode: the next batches are empty)
    sim.max_periodic_catch_up = max(sim.max_periodic_catch_up, _CHUNK)
    start, interval = sim.last_periodic, sim.periodic_interval
    initial = sim.split_watermarks()
    already = sim.watermark
    splits = {split: SplitProjection() for split in initial}
    for split, (watermark, idle) in initial.items():
        if not idle:
            splits[split].reaches_at.update({t: start for t in targets if watermark >= t})
    combined: dict[int, int] = {}

    def observe(tick: int, record: bool) -> bool:
        """Compare the copy with what is known; record what is new at ``tick`` (or only say whether any is)."""
        now, new = start + tick * interval, False
        for split, (watermark, idle) in sim.split_watermarks().items():
            facts = splits.setdefault(split, SplitProjection())
            if idle:
                if facts.idle_at is None and not initial.get(split, (0, False))[1]:
                    new = True
                    if record:
                        facts.idle_at = now
                continue
            if record and tick == 1 and watermark > initial.get(split, (watermark, False))[0]:
                facts.next_emit = watermark
            for target in targets:
                if watermark >= target and target not in facts.reaches_at:
                    new = True
                    if record:
                        facts.reaches_at[target] = now
        for target in targets:
            if already < target <= sim.watermark and target not in combined:
                new = True
                if record:
                    combined[target] = now
        return new

    def running_timers() -> bool:
        splits = sim.split_watermarks().items()
        return any(not idle and sim.generators[s].view().idle_timeout is not None for s, (_, idle) in splits)

    def open_questions() -> bool:
        if any(already < t and t not in combined for t in targets) or running_timers():
            return True
        return any(not idle and wm < targets[-1] for wm, idle in sim.split_watermarks().values()) if targets else False

    tick, chunk = 0, 1
    while tick < max_ticks and open_questions():
        chunk = min(chunk, max_ticks - tick)
        saved = sim.snapshot()
        sim.advance_processing_time(start + (tick + chunk) * interval)
        if chunk > 1 and observe(tick + chunk, record=False):  # something happened in the chunk: find when
            sim.restore(saved)
            for step in range(1, chunk + 1):
                sim.advance_processing_time(start + (tick + step) * interval)
                observe(tick + step, record=True)
        else:
            observe(tick + chunk, record=True)
        tick += chunk
        if _state(sim.snapshot()) == _state(saved) and not running_timers():
            # Generators are deterministic in their state; only idleness timers read the clock. A state that
            # a chunk of ticks left unchanged with no timer running never changes again.
            break
        chunk = min(chunk * 2, _CHUNK)
    return Projection(next_tick=start + interval, combined_reaches_at=combined, splits=splits)


def _state(snapshot: dict) -> tuple:
    """The part of a coordinator snapshot that is not the clock."""
    return (snapshot["generators"], snapshot["multiplexer"])
