"""Which ``fm_bucket`` value stands for each state bucket, so that every Spark partition gets its share.

A stateful operator's rows are hash-partitioned on its grouping columns: group
``(stage, bucket)`` runs in partition ``pmod(murmur3(columns, seed 42), N)``, N being ``spark.sql.shuffle.partitions``
when the checkpoint was created. Buckets numbered 0..B-1 split by luck: 8 buckets
land 5:3 on 2 partitions and 0:1:3:4 on 4, so one task does 5/8 of every batch
(and of the final flush) while the other core waits, or a core gets nothing.

So bucket i (0-based) is labelled with the smallest integer not yet used whose partition is ``i mod N``
(counting the buckets of all stages in order): each partition gets ``floor(B/N)`` or ``ceil(B/N)`` buckets.
The label depends on N; state is keyed by it. The layout is therefore fixed when a checkpoint is created and
read back from it on restart (:func:`fixed`), whatever the session's settings then: a layout that changed
would orphan every bucket's state. A checkpoint created before layouts were stored keeps labels 0..B-1.

The hash is Spark's ``Murmur3Hash`` (``functions.hash``), restated in
:mod:`floodmark.spark.stateful.spark_hash`; ``tests/spark/test_bucket_layout.py`` checks it against Spark's own.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from floodmark.driver import checkpoint_layout
from floodmark.driver.checkpoint_files import CheckpointFiles
from floodmark.driver.checkpoint_layout import floodmark_path
from floodmark.spark.stateful.spark_hash import murmur3_int, murmur3_string


def partition_of(label: int, partitions: int, stage: str) -> int:
    """The partition Spark's hash partitioning puts group ``(stage, label)`` in (a stage name, an int label)."""
    return murmur3_int(label, murmur3_string(stage)) % partitions


@dataclass(frozen=True)
class BucketLayout:
    """The ``fm_bucket`` value of each bucket, per stage.

    :ivar partitions: the partition count the labels were balanced for (0: labels 0..B-1, not balanced).
    :ivar labels: stage -> label of bucket 0..B-1 (every stage has B buckets).
    """

    partitions: int
    labels: dict[str, tuple[int, ...]]

    @property
    def count(self) -> int:
        """B, the number of buckets per stage."""
        return len(next(iter(self.labels.values())))

    def of(self, stage: str) -> tuple[int, ...]:
        return self.labels[stage]

    @classmethod
    def balanced(cls, count: int, partitions: int, stages: Sequence[str]) -> BucketLayout:
        """``count`` buckets per stage, the buckets of all ``stages`` (in order) dealt round-robin over
        ``partitions``."""
        labels: dict[str, tuple[int, ...]] = {}
        dealt = 0
        for stage in stages:
            targets = [(dealt + i) % partitions for i in range(count)]
            wanted = Counter(targets)
            found: dict[int, list[int]] = {part: [] for part in wanted}
            # One pass over 0, 1, 2, ...: each value's partition is hashed once (~N log N values for N
            # partitions), and each partition keeps its smallest values.
            for value in itertools.count():
                part = partition_of(value, partitions, stage)
                if part in found and len(found[part]) < wanted[part]:
                    found[part].append(value)
                    if all(len(found[p]) == n for p, n in wanted.items()):
                        break
            labels[stage] = tuple(found[part].pop(0) for part in targets)
            dealt += count
        return cls(partitions, labels)

    @classmethod
    def numbered(cls, count: int, stages: Sequence[str]) -> BucketLayout:
        """Labels 0..count-1 for every stage (what checkpoints created before layouts were stored use)."""
        return cls(0, {s: tuple(range(count)) for s in stages})

    def to_json(self) -> str:
        return json.dumps({"partitions": self.partitions, "labels": {s: list(v) for s, v in self.labels.items()}})

    @classmethod
    def from_json(cls, text: str) -> BucketLayout:
        data = json.loads(text)
        return cls(int(data["partitions"]), {s: tuple(int(x) for x in v) for s, v in data["labels"].items()})


def label_column(labels: Sequence[int], index: Column) -> Column:
    """Spark column: the label of bucket ``index`` (an int column, 0-based)."""
    return F.element_at(F.array(*[F.lit(v) for v in labels]), index + 1).cast("int")


def fixed(
    files: CheckpointFiles,
    checkpoint: str,
    requested: int | None,
    default: int,
    partitions: int,
    stages: Sequence[str],
    existing: bool = False,
) -> BucketLayout:
    """The checkpoint's layout: stored at its creation, read back on every restart.

    :arg requested: the bucket count the user asked for (``None``: ``default`` for a new checkpoint, the stored
        count on restart).
    :arg partitions: ``spark.sql.shuffle.partitions`` now (used only for a new checkpoint: Spark itself keeps
        the partition count a stateful checkpoint was created with).
    :arg existing: the checkpoint already holds a query's state (restart of a checkpoint that has no stored
        layout: its buckets were labelled 0..B-1).
    :raises ValueError: ``requested`` differs from the checkpoint's count, or a stage has no buckets in it
        (its state is keyed by its buckets; it cannot be re-split).
    """
    path = floodmark_path(checkpoint, checkpoint_layout.BUCKETS)
    text = files.read_text(path)
    if text is None:
        count = requested or default
        layout = BucketLayout.numbered(count, stages) if existing else BucketLayout.balanced(count, partitions, stages)
        if not files.write_once(path, layout.to_json()):  # another start wrote it first: theirs holds
            text = files.read_text(path)
    if text is not None:
        layout = BucketLayout.from_json(text)
    if requested is not None and requested != layout.count:
        raise ValueError(
            f"the checkpoint {checkpoint} keeps its state in {layout.count} buckets; buckets={requested} cannot "
            f"resume it (start with buckets={layout.count}, or from a new checkpoint)"
        )
    missing = [s for s in stages if s not in layout.labels]
    if missing:
        raise ValueError(f"the checkpoint {checkpoint} has no state buckets for stage(s) {missing}")
    return layout
