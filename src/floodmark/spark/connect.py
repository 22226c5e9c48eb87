"""Classic sessions and Spark Connect sessions: the one place that tells them apart.

A classic :class:`~pyspark.sql.SparkSession` lives in the driver's Python process and reaches the driver's JVM
through py4j; a Spark Connect session (``SparkSession.builder.remote("sc://...")``) is a gRPC client of a
server: no py4j, no ``sparkContext``, and a ``foreachBatch`` function runs in a Python process the server
starts, not in the client's. What floodmark does differently under Connect follows from that:

* checkpoint files (the control log, the job's definition) are read and written with Python's own file
  functions, by the client and by the server's ``foreachBatch`` process alike: the checkpoint is a plain path
  both can reach (:func:`connect_path_problem`), and a relative path a user gives is the client's, made absolute
  before it reaches the server (:func:`client_path`);
* JVM code is reached only through Spark's extension points (``spark.sql.extensions=floodmark.Extensions`` on
  the server), never through py4j: the Python forms of the tick source, the map side and the unpacking run;
* the query's driver step (the controller) runs in the server's ``foreachBatch`` process, so the handle reads
  the query's progress from the checkpoint;
* the server starts that process inside the query's ``start()``: on a busy server it can fail the start itself,
  which is then made again (:func:`~floodmark.spark.driver.restarts.start_again_when_busy`).
"""

from __future__ import annotations

import logging
import os
from typing import Any, TypeVar

T = TypeVar("T")
_LOG = logging.getLogger("floodmark")


def is_connect(session: Any) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect.session.SparkSession``), False for a classic one."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def client_path(spark: Any, location: str | os.PathLike[str]) -> str:
    """``location``, a path a user gave floodmark, as the session's Spark must be given it.

    Over Spark Connect the client and the server share a file system but not a working directory: a plain
    relative path is the client's (where the user wrote the input, where they look for the output), so it is made
    absolute against this process's working directory (a trailing ``/`` kept) before it reaches the server, which
    would resolve it against its own. Unchanged on a classic session, and for an absolute path or a URI (a URI is
    the same for both; :func:`connect_path_problem` says which ones floodmark's files can be in).
    """
    from floodmark.driver.checkpoint_files import has_scheme  # here: the executors' modules import this one

    text = os.fspath(location)
    if not is_connect(spark) or has_scheme(text) or os.path.isabs(text):
        return text
    absolute = os.path.abspath(text)
    return absolute + os.sep if text.endswith(("/", os.sep)) and not absolute.endswith(os.sep) else absolute


def connect_path_problem(location: str | os.PathLike[str]) -> str | None:
    """Why ``location`` cannot hold floodmark's files under Spark Connect, or None.

    The client and the server's ``foreachBatch`` process both read and write there with Python: the location must
    be an absolute path on a file system both reach (the same machine, or a mount they share), not a URI. The
    paths a user gives are made absolute first (:func:`client_path`); a relative one here has not been, and the
    server would resolve it against its own working directory.
    """
    from floodmark.driver.checkpoint_files import has_scheme  # here: the executors' modules import this one

    text = os.fspath(location)
    if has_scheme(text):
        return (
            "under Spark Connect floodmark reads and writes its checkpoint files with Python, on the client and in "
            "the server's foreachBatch process: give an absolute path on a file system both reach, not a URI"
        )
    if not os.path.isabs(text):
        return (
            "under Spark Connect a relative path is resolved against the server's working directory, not "
            "yours: give an absolute path on a file system the client and the server both reach"
        )
    return None
