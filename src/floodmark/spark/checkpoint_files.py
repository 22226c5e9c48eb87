"""Small files under a query's checkpoint, on the driver: local disk or any Hadoop file system.

floodmark keeps its control log (:mod:`floodmark.spark.control_log`) beside
Spark's own checkpoint, so it must live wherever users put checkpoints: a local
directory, ``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``... Only the driver
touches these files (the executors get the values they need through Spark's
job properties, see :mod:`floodmark.spark.batch_entry`).

Two implementations of one small interface:

- :class:`LocalFiles`: plain paths, with ``os`` (no Spark needed; the unit tests
  and the CLI's inspection of finished runs use it);
- :class:`HadoopFiles`: URIs with a scheme, through the session's Hadoop
  ``FileSystem`` (py4j), i.e. the same connectors, credentials and configuration
  Spark uses for its own checkpoint.

:func:`files_for` picks one for a location; :func:`join` builds child locations
without breaking ``scheme://authority`` (``pathlib`` would turn ``s3a://b/c``
into ``s3a:/b/c``).
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any, Protocol

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: "C:\..." is a Windows path


def has_scheme(location: str) -> bool:
    """True for URIs such as ``s3a://bucket/dir`` or ``file:///tmp/x``; False for plain paths."""
    return bool(_SCHEME.match(str(location)))


def join(base: str | os.PathLike[str], *parts: str) -> str:
    """``base/part/...`` for a plain path or a URI (keeps ``scheme://authority`` intact)."""
    text = os.fspath(base)
    if not has_scheme(text):
        return str(Path(text, *parts))
    return "/".join([text.rstrip("/"), *(part.strip("/") for part in parts)])


class CheckpointFiles(Protocol):
    """What the control log needs from a file system (paths are absolute, as given)."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None if it does not exist."""

    def write_once(self, path: str, text: str) -> bool:
        """Write ``text`` to ``path`` unless the file exists; True if this call wrote it.

        Readers never see a partial file (written aside, then renamed).
        """

    def list_names(self, directory: str) -> list[str]:
        """Names of the files in ``directory`` ([] if it does not exist)."""

    def delete(self, path: str) -> None:
        """Remove ``path`` if it exists."""


class LocalFiles:
    """:class:`CheckpointFiles` on the local file system."""

    def read_text(self, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except FileNotFoundError:
            return None

    def write_once(self, path: str, text: str) -> bool:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            return False
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, target)  # atomic and fails if the target exists: first write wins
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)
        return True

    def list_names(self, directory: str) -> list[str]:
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def delete(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)


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


def files_for(location: str, spark: Any | None = None) -> CheckpointFiles:
    """:class:`HadoopFiles` for a URI with a scheme (needs ``spark``), :class:`LocalFiles` for a plain path."""
    if has_scheme(location):
        if spark is None:
            raise ValueError(f"{location} is a URI: reading it needs a Spark session (Hadoop file systems)")
        return HadoopFiles(spark)
    return LocalFiles()
