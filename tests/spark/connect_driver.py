"""A Spark Connect client running one of ``connect_jobs.JOBS``: ``connect_driver.py <server url> <job> <root>``
runs it to the end of its input and prints the handle's :func:`connect_jobs.summary` as one JSON line
(``SUMMARY {...}``); ``connect_driver.py <server url> read <root>`` prints what ``read_late`` and
``read_dead_letters`` give of ``<root>/out`` (:func:`connect_jobs.records_read_back`);
``connect_driver.py <server url> surface <root>`` makes :func:`surface_job.run` in ``<root>`` and prints each of
:data:`surface_checks.CHECKS`' outcome (:func:`surface_checks.outcomes`) as its summary;
``connect_driver.py <server url> kafka <root> <bootstrap servers> <topic prefix>`` runs
:func:`connect_jobs.run_kafka`; with ``--start`` it runs the job to the end of its input too, prints ``BATCH <id>``
as each batch's report reaches the client's listener, and waits until it is killed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from connect_jobs import JOBS, records_read_back, replay, replay_summary, run, run_kafka, summary
from pyspark.sql import SparkSession

if __name__ == "__main__":
    url, job, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    spark = SparkSession.builder.remote(url).getOrCreate()
    if job == "aligned":  # connect_driver.py <url> aligned <root> <bootstrap servers> <topic>
        found = replay_summary(replay(spark, sys.argv[4], sys.argv[5], root, aligned=True))
        print("SUMMARY " + json.dumps(found), flush=True)
        sys.exit(0)
    if job == "read":  # connect_driver.py <url> read <root>: a finished run's outputs read back
        print("SUMMARY " + json.dumps(records_read_back(spark, root / "out")), flush=True)
        sys.exit(0)
    if job == "surface":  # connect_driver.py <url> surface <root>: the surface test's run and checks
        import surface_checks
        import surface_job

        print("SUMMARY " + json.dumps(surface_checks.outcomes(spark, surface_job.run(spark, root))), flush=True)
        sys.exit(0)
    kafka = sys.argv[4:6] if job == "kafka" else None
    if "--start" in sys.argv[4:]:
        listener = [lambda report: print(f"BATCH {report.batch_id}", flush=True)]
        if kafka is None:
            JOBS[job](spark, root / "in").run_to_completion(
                str(root / "ckpt"), str(root / "out"), "1 second", listeners=listener
            )
        else:
            run_kafka(spark, *kafka, root, "1 second", listeners=tuple(listener))
        while True:
            time.sleep(1)
    query = run(spark, job, root) if kafka is None else run_kafka(spark, *kafka, root)
    print("SUMMARY " + json.dumps(summary(query, job), default=str), flush=True)
