"""Checkpoint files on any Hadoop file system (hdfs://, s3a://, abfss://...), through the Spark session.

The Spark half of :mod:`floodmark.driver.checkpoint_files`: the same interface,
through the session's Hadoop ``FileSystem`` (py4j), i.e. the connectors,
credentials and configuration Spark uses for its own checkpoint.
"""

from __future__ import annotations

import uuid
from typing import Any

from floodmark.driver.checkpoint_files import CheckpointFiles, LocalFiles, has_scheme
from floodmark.spark.connect import connect_path_problem, is_connect


class HadoopFiles:
    """:class:`CheckpointFiles` through Hadoop's ``FileSystem`` of a (classic) Spark session.

    ``write_once`` writes a hidden temporary file and renames it: atomic on HDFS
    and object stores (an object appears whole); the existence check before it
    makes the first write win, as on the local disk, except for two writers
    racing between check and rename (a replayed sink against a zombie one).
    """

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _path(self, path: str) -> tuple[Any, Any]:
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        return hadoop_path, hadoop_path.getFileSystem(self._conf)

    def read_text(self, path: str) -> str | None:
        hadoop_path, fs = self._path(path)
        if not fs.exists(hadoop_path):
            return None
        stream = fs.open(hadoop_path)
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def write_once(self, path: str, text: str) -> bool:
        target, fs = self._path(path)
        if fs.exists(target):
            return False
        temp = self._jvm.org.apache.hadoop.fs.Path(target.getParent(), f".tmp-{uuid.uuid4().hex}")
        stream = fs.create(temp, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        renamed = fs.rename(temp, target)
        if not renamed:
            fs.delete(temp, False)
        return bool(renamed)

    def list_names(self, directory: str) -> list[str]:
        hadoop_path, fs = self._path(directory)
        if not fs.exists(hadoop_path):
            return []
        return [status.getPath().getName() for status in fs.listStatus(hadoop_path)]

    def delete(self, path: str) -> None:
        hadoop_path, fs = self._path(path)
        fs.delete(hadoop_path, False)

    def delete_tree(self, path: str) -> None:
        """Remove ``path`` and everything under it (nothing if it does not exist)."""
        hadoop_path, fs = self._path(path)
        fs.delete(hadoop_path, True)


def session_files(spark: Any) -> HadoopFiles | LocalFiles:
    """The files of locations Spark itself writes (outputs, a table's location) as ``spark`` sees them:
    :class:`HadoopFiles` on a classic session (a plain path is on its default file system), :class:`LocalFiles`
    over Spark Connect, whose locations are absolute paths the server's Python reaches
    (:func:`~floodmark.spark.connect.connect_path_problem`, checked before the query starts)."""
    return LocalFiles() if is_connect(spark) else HadoopFiles(spark)


def files_for(location: str, spark: Any | None = None) -> CheckpointFiles:
    """:class:`HadoopFiles` for a URI with a scheme (needs a classic ``spark``), :class:`LocalFiles` for a plain path.

    :raises ValueError: ``spark`` is a Spark Connect session and ``location`` is not an absolute plain path
        (:func:`~floodmark.spark.connect.connect_path_problem`).
    """
    if spark is not None and is_connect(spark):
        problem = connect_path_problem(location)
        if problem is not None:
            raise ValueError(f"{location}: {problem}")
        return LocalFiles()
    if has_scheme(location):
        if spark is None:
            raise ValueError(f"{location} is a URI: reading it needs a Spark session (Hadoop file systems)")
        return HadoopFiles(spark)
    return LocalFiles()
