"""A warning when records have no split: a null split column makes them one split, and a wrong column silently
turns per-split watermarks into one watermark over everything.

Records whose split column is null share the split ``""`` (a legitimate split: the rule is the combiner's). The
usual cause is not the data but the definition: a column the reader leaves null (a partition folder's column
read by a reader that does not fill it, a field named differently in the records), so that every record falls
in that one split and the watermark is no longer the slowest split's. The query goes on; the driver says so
once per source, with the counts, where the user sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from floodmark.driver.reports import BatchReport

_LOG = logging.getLogger("floodmark")


class NullSplitWarning:
    """A batch listener that logs one warning per source the first time a batch has records with a null split.

    :arg split_columns: ``{source: its split column's name (or the text of its expression)}`` for the sources
        that split their input (a source without a split column has one split by definition and is not watched).
    :arg source_of: ``(source, split)`` of a split label of the reports (``Controller.source_of``; set it when the
        controller is built).
    :arg warn: where the line goes (default: the ``floodmark`` logger at WARNING).
    """

    def __init__(
        self,
        split_columns: Mapping[str, str],
        source_of: Callable[[str], tuple[str, str]] = lambda label: ("", label),
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.split_columns = dict(split_columns)
        self.source_of = source_of
        self.warn = warn or _LOG.warning
        self.warned: set[str] = set()

    def __call__(self, report: BatchReport) -> None:
        totals: dict[str, int] = {}
        nulls: dict[str, int] = {}
        for label, count in report.split_records.items():
            source, split = self.source_of(label)
            totals[source] = totals.get(source, 0) + count
            if split == "":
                nulls[source] = nulls.get(source, 0) + count
        for source, count in nulls.items():
            if source in self.warned or source not in self.split_columns or not count:
                continue
            self.warned.add(source)
            every = "every one" if count == totals[source] else f"{count} of {totals[source]}"
            self.warn(
                f"floodmark: source {source!r}: {every} of batch {report.batch_id}'s records has a null split column "
                f"{self.split_columns[source]!r}; they share one split '' and its watermark (is the column filled? "
                "a partition folder's column needs a reader that keeps it, such as read_json_lines)"
            )
