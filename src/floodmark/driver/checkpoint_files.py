"""Small files under a query's checkpoint, on the driver: the interface and the local disk.

floodmark keeps its control log (:mod:`floodmark.driver.control_log`) beside
Spark's own checkpoint, so it must live wherever users put checkpoints: a local
directory, ``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``... Only the driver
touches these files (the executors get the values they need through Spark's
job properties, see :mod:`floodmark.spark.batch_entry`).

Two implementations of one small interface, :class:`CheckpointFiles`:

- :class:`LocalFiles` (here): plain paths, with ``os`` (no Spark needed; the unit
  tests and ``floodmark explain`` on a finished run use it);
- :class:`floodmark.spark.hadoop_files.HadoopFiles`: URIs with a scheme, through the
  session's Hadoop ``FileSystem`` (py4j), i.e. the same connectors, credentials
  and configuration Spark uses for its own checkpoint.

:func:`join` builds child locations without breaking ``scheme://authority``
(``pathlib`` would turn ``s3a://b/c`` into ``s3a:/b/c``).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

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


def directory_problem(location: str | os.PathLike[str]) -> str | None:
    """Why ``location`` cannot be a directory floodmark writes under (it is created when missing), or None.

    Checked on the local disk for plain paths and ``file:`` URIs: a regular file at the location or at one of
    its parents, a nearest existing parent that may not be written. Other URIs are left to their file system
    (its first write reports what is wrong there).
    """
    text = os.fspath(location)
    if has_scheme(text):
        parsed = urlparse(text)
        if parsed.scheme != "file":
            return None
        text = unquote(parsed.path)
    path = Path(text).absolute()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return "it is a regular file, not a directory" if existing == path else f"{existing} is a regular file"
    if existing != path and not os.access(existing, os.W_OK | os.X_OK):
        return f"it cannot be created: {existing} is not writable"
    if existing == path and not os.access(existing, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def require_directory(location: str | os.PathLike[str], what: str) -> None:
    """A ``ValueError`` naming ``location`` (``what``: the checkpoint, an output...) and why it cannot be used
    (:func:`directory_problem`); nothing when it can."""
    problem = directory_problem(location)
    if problem is not None:
        raise ValueError(f"{what} {os.fspath(location)} cannot be used: {problem}; choose another location")


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

    def delete_tree(self, path: str) -> None:
        """Remove ``path`` and everything under it (nothing if it does not exist)."""
        if Path(path).is_dir():
            shutil.rmtree(path)
        else:
            self.delete(path)
