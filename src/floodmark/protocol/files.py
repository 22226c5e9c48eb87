"""Input files as history: which files a replay reads, in which order, and the values of their partition folders.
The driver lists and orders them when a stream of files is defined (:func:`floodmark.spark.read_files_in_order`,
and the CLI before Spark starts); the executors read the folders' values of the file they read.

Spark's file stream takes new files in modification-time order, which says nothing about event time for history
that was copied, restored or written by several processes. The orders here: the files' paths (``"path"``:
``date=2026-01-01/`` folders and time-stamped names in time order), their file names (``"name"``, then the path:
``gateway=g1/0001.jsonl`` and ``gateway=g2/0001.jsonl`` interleave) or their modification times (``"modified"``,
Spark's own order).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

FileOrder = Literal["path", "name", "modified"]
"""How :func:`read_files_in_order` orders files (see the module docstring)."""

ORDERS: tuple[FileOrder, ...] = ("path", "name", "modified")
FORMATS = ("json", "parquet")
SUFFIXES = {"json": (".jsonl", ".json"), "parquet": (".parquet",)}
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""A partition folder's value that stands for null (Spark's and Hive's)."""


def list_files(path: str | Path, file_format: str | None = None, order: FileOrder = "path") -> list[Path]:
    """The data files under ``path`` (itself, when a file), descending into every folder, in ``order``.

    Hidden files and folders (``.``, ``_``: ``_SUCCESS``, ``.crc``) are skipped, as Spark skips them.

    :arg file_format: ``"json"`` (``.jsonl``, ``.json``) or ``"parquet"`` (``.parquet``); None: whichever the
        files have (:func:`detect_format`).
    :raises FileNotFoundError: ``path`` does not exist or holds no such file.
    :raises ValueError: an unknown order or format.
    """
    root = Path(path)
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}: use one of {', '.join(ORDERS)}")
    if not root.exists():
        raise FileNotFoundError(f"input {root} does not exist")
    file_format = file_format or detect_format(root)
    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}: use one of {', '.join(FORMATS)}")
    if root.is_file():
        return [root]
    files = [f for f in _data_files(root) if f.suffix in SUFFIXES[file_format]]
    if not files:
        raise FileNotFoundError(f"no {'/'.join(SUFFIXES[file_format])} files in {root} or its folders")
    relative = {f: f.relative_to(root).as_posix() for f in files}
    if order == "path":
        return sorted(files, key=relative.__getitem__)
    if order == "name":
        return sorted(files, key=lambda f: (f.name, relative[f]))
    return sorted(files, key=lambda f: (f.stat().st_mtime_ns, relative[f]))


def detect_format(path: str | Path) -> str:
    """``json`` or ``parquet``: the kind of the first data file (in path order) under ``path``.

    :raises FileNotFoundError: ``path`` does not exist. :raises ValueError: no file has a known suffix.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"input {root} does not exist")
    for candidate in [root] if root.is_file() else sorted(_data_files(root)):
        for file_format, suffixes in SUFFIXES.items():
            if candidate.suffix in suffixes:
                return file_format
    raise ValueError(f"cannot tell the format of {root}: give the format (json or parquet)")


def _data_files(root: Path) -> Iterator[Path]:
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [s for s in subfolders if not s.startswith((".", "_"))]
        for name in names:
            if not name.startswith((".", "_")):
                yield Path(folder, name)


def partition_values(root: Path, file: Path) -> dict[str, str | None]:
    """``{column: value}`` of the ``key=value`` folders between ``root`` and ``file`` (values unescaped as Spark
    escapes them; Hive's null folder as None)."""
    values: dict[str, str | None] = {}
    if file == root:
        return values
    for part in file.relative_to(root).parts[:-1]:
        key, sep, value = part.partition("=")
        if sep and key:
            text = unquote(value)
            values[unquote(key)] = None if text == HIVE_NULL else text
    return values
