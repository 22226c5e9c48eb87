"""Where floodmark keeps its own files in a query's checkpoint, ``<checkpoint>/floodmark/``: every name once, here.

Spark's files beside them (offsets, commits, state) are Spark's (``spark/driver/spark_checkpoint.py`` reads them).
A checkpoint is a plain path or a Hadoop URI (:func:`floodmark_path` keeps a URI's ``scheme://authority``).
"""

from __future__ import annotations

import os

from floodmark.driver.checkpoint_files import join

FOLDER = "floodmark"
"""floodmark's folder in the checkpoint."""
CONTROL = "control"
"""The control log: one entry per batch (:mod:`floodmark.driver.control_log`)."""
METRICS = "metrics.jsonl"
"""A JSON line per completed batch's report (local checkpoints; :mod:`floodmark.driver.controller`)."""
DEFINITION = "definition.json"
"""The job's definition, written at each start (:mod:`floodmark.driver.definition`)."""
HOSTS = "hosts.json"
"""Where each stage runs, ``{"hosts": {stage: "python" | "jvm"}}``, fixed when the checkpoint is created: a stage's
state is its host's own (``spark/driver/query.py``)."""
BUCKETS = "buckets.json"
"""Each stage's state buckets, fixed when the checkpoint is created (``spark/stateful/bucket_layout.py``)."""
STATE_FORMAT = "state-format-{}.json"
"""``state-format-<n>.json``: format n has written state to this checkpoint (``spark/driver/query.py``;
:mod:`floodmark.spark.stateful.state_codec`)."""
TICKS = "ticks.json"
"""The driver's requests for batches without input (``spark/sources/ticks.py``; local checkpoints)."""
END_OF_INPUT = "end-of-input"
"""A Spark Connect client's requests that a bounded run end its input (``spark/driver/query.py``)."""


def floodmark_path(checkpoint: str | os.PathLike[str], *parts: str) -> str:
    """``<checkpoint>/floodmark/<parts...>``, for a plain path or a URI."""
    return join(checkpoint, FOLDER, *parts)
