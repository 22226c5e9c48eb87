"""What a watermark generator tells ``floodmark explain`` about itself: data, read once per explanation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GeneratorView:
    """A generator's state in the terms explain uses; every field but ``description`` may be ``None``: not known.

    :ivar description: what the generator is, in words (kind and parameters).
    :ivar out_of_orderness: its current out-of-orderness bound (ms).
    :ivar highest_timestamp: the highest record timestamp (ms) it has seen (``None`` also before any record).
    :ivar has_seen_records: whether it has seen a record.
    :ivar watermark_lag: how far (ms) its watermark trails the highest timestamp at the next periodic emit: a
        record at ``t`` lifts the watermark to ``t - watermark_lag`` (``bound + 1`` for bounded
        out-of-orderness, Flink's ``max - bound - 1``).
    :ivar idle_timeout: the idleness timeout (ms), if idleness detection wraps it.
    :ivar inactive_since: processing time (ms) of the first periodic check that saw no new record, while its
        idleness timer runs (``None``: no idleness, or active).
    :ivar unread: records of the split its source had not read when it planned the last batch that said
        (``SplitBatchStats.unread``; ``None``: not said, or no idleness); a split with unread records is never idle.
    """

    description: str
    out_of_orderness: int | None = None
    highest_timestamp: int | None = None
    has_seen_records: bool | None = None
    watermark_lag: int | None = None
    idle_timeout: int | None = None
    inactive_since: int | None = None
    unread: int | None = None

    def timestamp_for(self, watermark: int) -> int | None:
        """The lowest record timestamp (ms, inclusive) that lifts the watermark to ``watermark`` at the next
        periodic emit: ``watermark + watermark_lag`` (``None``: not known)."""
        return None if self.watermark_lag is None else watermark + self.watermark_lag
