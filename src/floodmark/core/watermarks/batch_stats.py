"""Per-split statistics of one micro-batch: what the runtime feeds the coordinator."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SplitBatchStats:
    """What one micro-batch contained for one split.

    :arg split: the split's id (a Kafka partition, a file, a shard), as a string.
    :arg count: number of records with a usable timestamp (bad records excluded).
    :arg min_timestamp: smallest record timestamp in ms (meaningless when count is 0).
    :arg max_timestamp: largest record timestamp in ms (meaningless when count is 0).
    :arg quantiles: optional quantiles of the record timestamps, ``{q: ts}`` with
        ``q`` in [0, 1]; used by percentile watermark generators.
    :arg unread: records of the split that were there to read when the batch was planned but are not in it
        (Kafka: the partition's end offset then minus the batch's end offset, records held back by a rate limit or
        alignment's pause; files read in order: the split's files after the batch's), or None when the source does
        not say. A split with unread records is never idle (:class:`~floodmark.core.watermarks.idleness.
        WatermarksWithIdleness`).
    """

    split: str
    count: int
    min_timestamp: int = 0
    max_timestamp: int = 0
    quantiles: dict[float, int] = field(default_factory=dict)
    unread: int | None = None

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count must not be negative, got {self.count}")
        if self.unread is not None and self.unread < 0:
            raise ValueError(f"unread must not be negative, got {self.unread}")
        if self.count > 0 and self.min_timestamp > self.max_timestamp:
            raise ValueError(f"min_timestamp {self.min_timestamp} is greater than max_timestamp {self.max_timestamp}")
