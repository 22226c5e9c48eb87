"""What each source left unread when Spark planned a batch: the backlog that keeps a split from going idle.

A split is idle only when caught up (:class:`~floodmark.core.watermarks.idleness.WatermarksWithIdleness`): the
controller asks, for every batch, ``{source: {split: unread}}`` (``EngineHooks.backlog``). Two sources say:

* a topic read by :func:`~floodmark.spark.read_kafka` with floodmark's jar (its splits the partitions): the
  partition's latest offset as Spark planned the batch minus the batch's end offset, as the aligned source recorded
  it (:func:`~floodmark.spark.sources.kafka.planned_backlog`: one read per batch that Spark answers on its driver
  without a job, ~14 ms; asked only for sources with idleness);
* :func:`~floodmark.spark.read_files_in_order` split by a folder column: the split's files after the batch's.

Each answer is matched to the batch by its offsets in Spark's offset log, so a batch replayed after a restart
(planned by the run before) gets no answer and its splits keep the backlog the last batch said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from floodmark.spark.driver.source_time import Source
from floodmark.spark.source_options import option_values
from floodmark.spark.sources.kafka import alignment_keys, planned_backlog
from floodmark.spark.sources.ordered_files import BASE_OPTION, FILES_OPTION, FilesBacklog


@dataclass(frozen=True)
class SourcesBacklog:
    """The sources of a query that say what they left unread: ``kafka`` their aligned sources' keys, ``files`` their
    file lists, by source name."""

    kafka: Mapping[str, Sequence[str]] = field(default_factory=dict)
    files: Mapping[str, Sequence[FilesBacklog]] = field(default_factory=dict)

    @classmethod
    def of(cls, sources: Mapping[str, Source]) -> SourcesBacklog | None:
        """The backlog of ``sources`` that say it (None: none does)."""
        kafka, files = {}, {}
        for name, source in sources.items():
            split = source.time.split
            if not isinstance(split, str):
                continue
            if split == "partition" and source.time.watermarks.idle_timeout_ms is not None:
                keys = alignment_keys(source.frame)
                if keys:
                    kafka[name] = keys
            listed_files = option_values(source.frame, FILES_OPTION)
            lists = zip(listed_files, option_values(source.frame, BASE_OPTION), strict=True)
            told = [FilesBacklog(json.loads(listed), base, split) for listed, base in lists]
            if told and all(t.split_of is not None for t in told):
                files[name] = told
        return cls(kafka, files) if kafka or files else None

    def for_batch(self, offsets: Sequence[object]) -> dict[str, dict[str, int]]:
        """``{source: {split: unread}}`` for the batch whose offsets (each source's, as Spark logged them) are
        ``offsets``; called in the query's ``foreachBatch``, whose session is active."""
        found: dict[str, dict[str, int]] = {}
        if self.kafka:
            spark = SparkSession.getActiveSession()
            assert spark is not None, "called inside the query's foreachBatch, whose session is active"
            for name, keys in self.kafka.items():
                unread = planned_backlog(spark, keys, offsets)
                if unread:
                    found[name] = unread
        for name, lists in self.files.items():
            for listed in lists:
                unread = listed.unread(offsets)
                if unread is not None:
                    found.setdefault(name, {}).update(unread)
        return found
