"""A fresh session's Python workers before and after ``python_workers.prestart`` (run as a script).

Prints one JSON line: ``{"before": [...], "after": [...]}``, for each task of a ``mapInArrow`` job run before
the warm-up and of one run after it, whether its worker had imported floodmark's operators already.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pyarrow as pa

from floodmark.spark import local_session
from floodmark.spark.driver import python_workers


def imported_per_task(spark) -> list[bool]:
    def operators_imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Nested, so pickled by value: unpickling it in the worker imports nothing of floodmark's operators.
        imported = all(name in sys.modules for name in python_workers.OPERATOR_MODULES)
        for batch in batches:
            yield pa.record_batch({"imported": pa.array([imported] * batch.num_rows)})

    slots = spark.sparkContext.defaultParallelism
    rows = spark.range(0, slots, numPartitions=slots).mapInArrow(operators_imported, "imported boolean").collect()
    return [row.imported for row in rows]


def main() -> None:
    spark = local_session("floodmark-python-workers", cores=2, shuffle_partitions=2)
    before = imported_per_task(spark)
    thread = python_workers.prestart(spark)
    assert thread is not None
    thread.join(timeout=300)
    print(json.dumps({"before": before, "after": imported_per_task(spark)}))
    spark.stop()


if __name__ == "__main__":
    main()
