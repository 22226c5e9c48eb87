"""When the next batch must run although no input arrives, and what each state bucket last said.

Spark runs a micro-batch when a source has new data. floodmark also needs batches without input: to fire
windows once the watermark has moved (seed 000's lone last window), to notice that splits went idle, to
fire processing-time triggers. A tick source makes those batches (:mod:`floodmark.spark.ticks`); this module
decides when, after every batch, from what the driver knows:

* the next batch runs **now** (at the next trigger) when its control entry lets something fire: a stage's
  input watermark has reached the lowest watermark deadline of its buckets (an ON_TIME pane, a garbage
  collection: ``next_watermark_deadline``), or its processing time has reached their lowest processing-time
  deadline (an EARLY pane: ``next_processing_deadline``), or the input is bounded (a bounded run needs a batch
  that reads nothing to see the end of its input), or the entry ends the input;
* otherwise it runs at the **earliest** of: the processing time at which a source's watermark, with no new
  record, reaches the lowest watermark deadline of any stage (periodic emits, idleness:
  :meth:`SourceWatermarks.reaches`); the lowest processing-time deadline; ``now + heartbeat``.

With nothing to fire and no idleness to detect, an idle query runs one batch per heartbeat instead of one
per trigger. Input arriving meanwhile runs a batch anyway (its buckets only): nothing else can fire in it,
since its entry reached no deadline. A batch that runs for one bucket runs every bucket of the query (the ticks
go to all): a bucket without input that has nothing due itself returns at once (:meth:`BucketGauges.due`).
Buckets that did not run, or returned at once, keep what they last reported (:class:`BucketGauges`), which is
what the stage's output watermark and the next decision read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.core.watermarks import SourceWatermarks

HEARTBEAT_MS = 60_000
"""An idle query still runs a batch this often (ms): metrics keep flowing, and nothing waits longer than this
if a deadline was missed."""

HEARTBEAT = "heartbeat"

GAUGES = ("fm_hold", "fm_oldest_pending", "fm_open_windows", "fm_next_fire", "fm_next_timer")
"""What a bucket reports after it ran (the GAUGE row's fields, ``floodmark.spark.plan.STATS_META``)."""


class BucketGauges:
    """What each state bucket reported the last time it ran, per stage.

    A bucket runs in a batch with its input or with ticks; in other batches its state did not change, so what
    it reported before still holds. Kept in the control entries (``ControlEntry.buckets``) across restarts.
    """

    def __init__(self, saved: dict[str, list[Any]] | None = None) -> None:
        self.buckets: dict[str, list[Any]] = {label: list(values) for label, values in (saved or {}).items()}

    def update(self, stage: str, rows: Iterable[dict[str, Any]]) -> None:
        """The GAUGE rows of the buckets of ``stage`` that ran in a batch."""
        for row in rows:
            self.buckets[f"{stage}/{row['fm_bucket']}"] = [row.get(name) for name in GAUGES]

    def reported(self, stage: str, bucket: Any) -> bool:
        """Whether ``stage``'s bucket ``bucket`` (its label, ``fm_bucket``) has reported."""
        return f"{stage}/{bucket}" in self.buckets

    def values(self, stage: str, gauge: str, bucket: Any = None) -> list[int]:
        """The non-null values of ``gauge`` over ``stage``'s buckets (or only ``bucket``'s)."""
        i = GAUGES.index(gauge)
        if bucket is not None:
            report = self.buckets.get(f"{stage}/{bucket}")
            reports = [] if report is None else [report]
        else:
            prefix = f"{stage}/"
            reports = [v for label, v in self.buckets.items() if label.startswith(prefix)]
        return [int(v[i]) for v in reports if v[i] is not None]

    def lowest(self, stage: str, gauge: str, bucket: Any = None) -> int | None:
        values = self.values(stage, gauge, bucket)
        return min(values) if values else None

    def due(self, stage: str, watermark: int, processing_time: int, bucket: Any = None) -> str | None:
        """Why a batch whose control entry has ``watermark`` (``stage``'s input watermark) and
        ``processing_time`` lets ``stage``'s buckets (or only ``bucket``) fire or collect a window without new
        input; None if it does not.

        The operators' contract: below its ``next_watermark_deadline`` (``fm_next_fire``) and
        ``next_processing_deadline`` (``fm_next_timer``) a bucket without input changes nothing. So the driver
        asks for no batch then, and a bucket that runs anyway (with another's ticks) skips it.
        """
        deadline = self.lowest(stage, "fm_next_fire", bucket)
        if deadline is not None and watermark >= deadline:
            return f"{stage or 'the stage'}'s watermark reached a window"
        timer = self.lowest(stage, "fm_next_timer", bucket)
        if timer is not None and processing_time >= timer:
            return f"{stage or 'the stage'}'s processing-time trigger is due"
        return None

    def total(self, stage: str, gauge: str) -> int:
        return sum(self.values(stage, gauge))

    def snapshot(self) -> dict[str, list[Any]]:
        return {label: list(values) for label, values in sorted(self.buckets.items())}


@dataclass(frozen=True)
class NextBatch:
    """The decision: run the next batch at processing time ``at`` (ms; ``<= now``: at the next trigger)."""

    at: int
    reason: str

    @property
    def waits_for_input(self) -> bool:
        """Nothing can fire before the heartbeat unless input arrives."""
        return self.reason == HEARTBEAT


def next_batch(
    now: int,
    input_watermarks: dict[str, int],
    processing_time: int,
    gauges: BucketGauges,
    sources: Sequence[SourceWatermarks],
    bounded: bool,
    heartbeat: int = HEARTBEAT_MS,
) -> NextBatch:
    """When the next batch must run (see the module docstring).

    :arg now: the driver's processing time (ms). :arg input_watermarks: each stage's input watermark in the
        control entry just written. :arg processing_time: that entry's processing time.
    """
    if bounded:
        return NextBatch(now, "bounded input: every trigger runs")
    fire_at: list[int] = []
    for stage, watermark in input_watermarks.items():
        due = gauges.due(stage, watermark, processing_time)
        if due is not None:
            return NextBatch(now, due)
        deadline = gauges.lowest(stage, "fm_next_fire")
        if deadline is not None:
            fire_at.append(deadline)
    candidates = [(now + heartbeat, HEARTBEAT)]
    timers = [t for stage in input_watermarks if (t := gauges.lowest(stage, "fm_next_timer")) is not None]
    if timers:
        candidates.append((min(timers), "a processing-time trigger"))
    if fire_at:
        target = min(fire_at)
        for source in sources:
            reached = source.reaches(target, heartbeat)
            if reached is not None:
                candidates.append((reached, "the watermark reaches a window (periodic emits, idleness)"))
    at, reason = min(candidates)
    return NextBatch(max(at, now), reason)
