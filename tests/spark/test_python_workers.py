"""Python workers started while a query plans (floodmark.spark.python_workers)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pyarrow as pa

from floodmark.spark import python_workers


def test_the_warm_up_function_imports_the_operators_and_passes_its_input_on():
    batch = pa.record_batch({"id": pa.array([0, 1], pa.int64())})
    assert list(python_workers.import_operators(iter([batch]))) == [batch]
    assert all(name in sys.modules for name in python_workers.OPERATOR_MODULES)


def test_workers_start_once_per_spark_context_in_the_background_and_serve_the_next_python_tasks(spark, monkeypatch):
    context = spark.sparkContext
    monkeypatch.setattr(python_workers, "_started", set())  # this shared session's queries may have started them
    context.setLocalProperty("floodmark.test.caller", "kept")
    try:
        thread = python_workers.prestart(spark)
        assert thread is not None
        thread.join(timeout=300)
        assert not thread.is_alive()
        assert python_workers.prestart(spark) is None  # once per SparkContext

        jobs = context.statusTracker().getJobIdsForGroup(python_workers.JOB_GROUP)
        assert jobs and all(context.statusTracker().getJobInfo(job).status == "SUCCEEDED" for job in jobs)
        # The job's group and description stayed on its own thread.
        assert context.getLocalProperty("floodmark.test.caller") == "kept"
        assert context.getLocalProperty("spark.jobGroup.id") != python_workers.JOB_GROUP

        def operators_imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            """In a Python worker (pickled by value): whether it imported floodmark's operators before this task."""
            imported = all(name in sys.modules for name in python_workers.OPERATOR_MODULES)
            for batch in batches:
                yield pa.record_batch({"imported": pa.array([imported] * batch.num_rows)})

        slots = context.defaultParallelism
        imported = spark.range(0, slots, numPartitions=slots).mapInArrow(operators_imported, "imported boolean")
        assert [row.imported for row in imported.collect()] == [True] * slots
    finally:
        context.setLocalProperty("floodmark.test.caller", None)  # type: ignore[arg-type]


class SessionThatFails:
    """A session whose every job fails (a stopped one, or a cluster without floodmark installed)."""

    class sparkContext:
        applicationId, startTime, defaultParallelism = "stopped", 0, 2

        @staticmethod
        def setJobGroup(*args: object) -> None:
            pass

    @staticmethod
    def range(*args: object, **kwargs: object):
        raise RuntimeError("Cannot call methods on a stopped SparkContext.")


def test_a_warm_up_that_fails_is_logged_and_raises_nothing(caplog, monkeypatch):
    monkeypatch.setattr(python_workers, "_started", set())
    with caplog.at_level(logging.DEBUG, logger=python_workers.__name__):
        thread = python_workers.prestart(SessionThatFails())  # type: ignore[arg-type]
        assert thread is not None
        thread.join(timeout=10)
    assert "stopped SparkContext" in caplog.text
