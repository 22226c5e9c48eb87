"""When the next batch must run although no input arrives, and what each state bucket last said.

Spark runs a micro-batch when a source has new data. floodmark also needs batches without input: to fire
windows once the watermark has moved (the lone last window of a source gone quiet), to notice that splits went idle, to
fire processing-time triggers. A tick source makes those batches (:mod:`floodmark.spark.sources.ticks`); this module
decides when, after every batch, from what the driver knows:

* the next batch runs **now** (at the next trigger) when its control entry lets something fire: a stage's
  input watermark has reached the lowest watermark deadline of its buckets (an ON_TIME pane, a garbage
  collection: ``next_watermark_deadline``), or its processing time has reached their lowest processing-time
  deadline (an EARLY pane: ``next_processing_deadline``), or the input is bounded (a bounded run needs a batch
  that reads nothing to see the end of its input), or the entry ends the input;
* **no batch** before the heartbeat once the end of input has reached every stage (the batch just run had
  watermark MAX everywhere): every window has fired and been collected, nothing can fire any more. A bounded
  run stops there, after its flush, with no trigger running;
* otherwise it runs at the **earliest** of: the processing time at which a stage's input watermark, with no new
  record, reaches its lowest watermark deadline: when every source it reads (through its upstream stages) has
  reached it (periodic emits, idleness: :meth:`SourceWatermarks.reaches`; a stage whose sources are all past its
  deadline waits for an upstream stage's hold, whose own deadline wakes the query); the lowest processing-time
  deadline; ``now + heartbeat``.

With nothing to fire and no idleness to detect, an idle query runs one batch per heartbeat instead of one
per trigger. Input arriving meanwhile runs a batch anyway (its buckets only): nothing else can fire in it,
since its entry reached no deadline. A batch that runs for one bucket runs every bucket of the query (the ticks
go to all): a bucket without input that has nothing due itself returns at once (:meth:`BucketGauges.due`).
Buckets that did not run, or returned at once, keep what they last reported (:class:`BucketGauges`), which is
what the stage's output watermark and the next decision read. :class:`BucketGauges` lives beside the control
entry that carries it (:mod:`floodmark.protocol.control`), which the executors read too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from floodmark.core.watermarks import SourceWatermarks
from floodmark.protocol.control import BucketGauges
from floodmark.protocol.wire import GAUGES as GAUGES  # re-exported: what BucketGauges keeps
from floodmark.protocol.wire import NEXT_FIRE, NEXT_TIMER

HEARTBEAT_MS = 60_000
"""An idle query still runs a batch this often (ms): metrics keep flowing, and nothing waits longer than this
if a deadline was missed."""

HEARTBEAT = "heartbeat"


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
    sources: Mapping[str, Sequence[SourceWatermarks]],
    bounded: bool,
    heartbeat: int = HEARTBEAT_MS,
    flushed: bool = False,
) -> NextBatch:
    """When the next batch must run (see the module docstring).

    :arg now: the driver's processing time (ms). :arg input_watermarks: each stage's input watermark in the
        control entry just written. :arg processing_time: that entry's processing time. :arg sources: each
        stage's sources, the ones its input watermark is the MIN of through its upstream stages. :arg flushed:
        the batch just run had every stage's input watermark at MAX (the end of input has reached the last level).
    """
    if flushed:
        return NextBatch(now + heartbeat, HEARTBEAT)
    if bounded:
        return NextBatch(now, "bounded input: every trigger runs")
    candidates = [(now + heartbeat, HEARTBEAT)]
    probed: dict[tuple[int, int], int | None] = {}  # (source, deadline) -> when: stages share sources and deadlines
    for stage, watermark in input_watermarks.items():
        due = gauges.due(stage, watermark, processing_time)
        if due is not None:
            return NextBatch(now, due)
        deadline = gauges.lowest(stage, NEXT_FIRE)
        reached = None if deadline is None else _reaches(sources.get(stage, ()), deadline, heartbeat, probed)
        if reached is not None:
            candidates.append((reached, "the watermark reaches a window (periodic emits, idleness)"))
    timers = [t for stage in input_watermarks if (t := gauges.lowest(stage, NEXT_TIMER)) is not None]
    if timers:
        candidates.append((min(timers), "a processing-time trigger"))
    at, reason = min(candidates)
    return NextBatch(max(at, now), reason)


def _reaches(
    sources: Sequence[SourceWatermarks], deadline: int, within: int, probed: dict[tuple[int, int], int | None]
) -> int | None:
    """When every one of ``sources`` has reached ``deadline`` with no new record, within ``within`` ms; None
    when one cannot, or when all have already (what holds the stage back then is an upstream stage's hold).
    ``probed`` keeps each source's answer for a deadline (a probe runs a copy of its generators forward)."""
    behind = [source for source in sources if source.watermark < deadline]
    times = []
    for source in behind:
        key = (id(source), deadline)
        if key not in probed:
            probed[key] = source.reaches(deadline, within)
        times.append(probed[key])
    if not behind or None in times:
        return None
    return max(t for t in times if t is not None)
