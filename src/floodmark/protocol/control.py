"""What the driver tells each micro-batch, and what each state bucket last reported.

The driver writes a :class:`ControlEntry` per micro-batch into its control log
(:mod:`floodmark.driver.control_log`) and hands it to the batch's tasks as a job property
(:mod:`floodmark.spark.batch_entry`), as JSON: its fields are that JSON's, which checkpoints keep. The entry
carries every bucket's last GAUGE values (:class:`BucketGauges`), so that a bucket without input can tell
whether the batch lets it fire anything, by the rule the driver asks for a batch with.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from floodmark.protocol.wire import BUCKET, GAUGES, NEXT_FIRE, NEXT_TIMER


@dataclass(frozen=True)
class ControlEntry:
    """What one micro-batch is told.

    :ivar seq: the control offset (entry N is for the batch that reads offset N).
    :ivar watermark: the MIN of the stages' input watermarks for the batch (ms).
    :ivar processing_time: the batch's processing time (ms), fixed here so replays agree.
    :ivar end_of_input: the input is bounded and exhausted: the watermark is MAX.
    :ivar coordinator: the coordinator's snapshot after the previous batch.
    :ivar stage_watermarks: each stage's input watermark for the batch (ms), by stage name.
    :ivar buckets: what each state bucket reported the last time it ran, after the previous batch
        (:class:`BucketGauges`).
    """

    seq: int
    watermark: int
    processing_time: int
    end_of_input: bool = False
    coordinator: dict[str, Any] = field(default_factory=dict)
    stage_watermarks: dict[str, int] = field(default_factory=dict)
    buckets: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, fields: dict[str, Any]) -> ControlEntry:
        """The entry whose JSON fields are ``fields``; a field entries no longer have (``metrics``, always
        empty, in checkpoints written before it was dropped) is ignored."""
        known = {name: value for name, value in fields.items() if name in cls.__dataclass_fields__}
        return cls(**known)

    def watermark_for(self, stage: str) -> int:
        """The input watermark of ``stage`` for this batch (ms)."""
        return self.stage_watermarks[stage]


class BucketGauges:
    """What each state bucket reported the last time it ran, per stage (its GAUGE row's :data:`GAUGES`).

    A bucket runs in a batch with its input or with ticks; in other batches its state did not change, so what
    it reported before still holds. Kept in the control entries (``ControlEntry.buckets``) across restarts.
    """

    def __init__(self, saved: dict[str, list[Any]] | None = None) -> None:
        self.buckets: dict[str, list[Any]] = {label: list(values) for label, values in (saved or {}).items()}

    def update(self, stage: str, rows: Iterable[dict[str, Any]]) -> None:
        """The GAUGE rows of the buckets of ``stage`` that ran in a batch."""
        for row in rows:
            self.buckets[f"{stage}/{row[BUCKET]}"] = [row.get(name) for name in GAUGES]

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
        deadline = self.lowest(stage, NEXT_FIRE, bucket)
        if deadline is not None and watermark >= deadline:
            return f"{stage or 'the stage'}'s watermark reached a window"
        timer = self.lowest(stage, NEXT_TIMER, bucket)
        if timer is not None and processing_time >= timer:
            return f"{stage or 'the stage'}'s processing-time trigger is due"
        return None

    def total(self, stage: str, gauge: str) -> int:
        return sum(self.values(stage, gauge))

    def snapshot(self) -> dict[str, list[Any]]:
        return {label: list(values) for label, values in sorted(self.buckets.items())}
