"""Python workers started while a query plans (floodmark.spark.driver.python_workers)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from floodmark.spark.driver import python_workers

DRIVER = Path(__file__).with_name("python_workers_driver.py")


def test_the_warm_up_function_imports_the_operators_and_passes_its_input_on():
    batch = pa.record_batch({"id": pa.array([0, 1], pa.int64())})
    assert list(python_workers.import_operators(iter([batch]))) == [batch]
    assert all(name in sys.modules for name in python_workers.OPERATOR_MODULES)


def test_workers_start_once_per_spark_context_in_the_background(spark, monkeypatch):
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
    finally:
        context.setLocalProperty("floodmark.test.caller", None)  # type: ignore[arg-type]


def test_a_fresh_sessions_next_python_tasks_find_the_operators_imported():
    # A fresh process: in the shared test session the pool holds more idle workers than slots (earlier tests'),
    # so which ones a job gets says nothing there.
    done = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, text=True, timeout=600, check=True)
    workers = json.loads(done.stdout.strip().splitlines()[-1])
    assert workers == {"before": [False, False], "after": [True, True]}


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
