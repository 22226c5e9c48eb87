"""How a bucket's operator snapshot is stored in its RocksDB value, and which state format it is in.

The snapshot travels between the JVM and the Python worker every batch, twice
(read, then write back), and that transfer costs ~20 ms per MiB each way
(SPARK_FACTS.md). Columnar snapshots are mostly small integers and repeated
flags: zstd makes them ~20x smaller in ~1-2 ms per MiB (measured: 1.8 MB ->
0.08 MB for 23k windows), so the transfer all but disappears.

**Value layout**: ``b"fmz"``, one byte naming the state format (``0x30 + format``: ASCII ``"1"`` for format 1),
the snapshot's length (8 bytes, big-endian), then the snapshot as a zstd frame. A value without the ``b"fmz"``
prefix is format 0: an uncompressed snapshot, as the first floodmark checkpoints stored it.

**State formats** (:data:`FORMAT` is the one this floodmark writes to new checkpoints; where the values live:
:mod:`floodmark.spark.stateful.bucket_state`):

* 0: a bucket's snapshot in one value, uncompressed (no header).
* 1: a bucket's snapshot in one value, compressed behind the header above.
* 2: a bucket's operator in parts (a head and its segments of deferred partials), each compressed behind the
  header above and cut into chunks, in a ``transformWithStateInPandas`` map state. The head of a window
  operator on the columnar policy is a format-1 snapshot that may name segments.

The operator hosting a checkpoint's first level follows its format, so a checkpoint keeps the layout it was created
with: one created with format 0 or 1 goes on storing one value per bucket (in format 1), and only a new checkpoint
gets format 2.

A newer format comes with a migration from the one before (:data:`MIGRATIONS`, format n -> n + 1 on the
snapshot's bytes), applied when a bucket's value is read: a checkpoint written by an older floodmark is
migrated bucket by bucket in the first batch that runs each bucket, and written back in :data:`FORMAT`. A value
in a format newer than :data:`FORMAT` (written by a newer floodmark) is refused by name
(:class:`StateFormatError`), and so is a checkpoint that records one
(:func:`floodmark.spark.driver.checkpoint_records.check_state_format`, before the query starts): reading it as an
older format would misread the state.

The checkpoint records every format that has written to it: ``<checkpoint>/floodmark/state-format-<n>.json``,
written once by the first start with format ``n`` (the floodmark version that did it inside).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from floodmark import __version__

FORMAT = 2
"""The state format this floodmark writes to new checkpoints (see the module docstring)."""
PARTS_FORMAT = 2
"""The first format that stores a bucket in parts."""
OLDEST_FORMAT = 0
"""The oldest state format this floodmark reads (migrating it)."""
MIGRATIONS: dict[int, Callable[[bytes], bytes]] = {}
"""``{n: snapshot in format n -> snapshot in format n + 1}`` for every ``OLDEST_FORMAT <= n < FORMAT`` whose
snapshot changed (a format that only changed the value's layout needs none)."""

PREFIX = b"fmz"
_CODEC = "zstd"
_HEADER = len(PREFIX) + 1 + 8


class StateFormatError(ValueError):
    """A bucket's value or a checkpoint in a state format this floodmark cannot read."""


def encode(snapshot: bytes, state_format: int | None = None) -> bytes:
    """The stored form of ``snapshot`` (a snapshot, or a part of one, in ``state_format``: 1 or later; default
    :data:`FORMAT`)."""
    payload = pa.compress(snapshot, codec=_CODEC, asbytes=True)
    header = PREFIX + bytes([0x30 + (FORMAT if state_format is None else state_format)])
    return header + len(snapshot).to_bytes(8, "big") + payload


def value_format(blob: bytes) -> int:
    """The state format of the stored value ``blob``."""
    return blob[len(PREFIX)] - 0x30 if blob.startswith(PREFIX) and len(blob) >= _HEADER else 0


def decode(blob: bytes) -> bytes:
    """The snapshot stored as ``blob``, migrated to :data:`FORMAT` when it is older.

    :raises StateFormatError: ``blob`` is in a format newer than :data:`FORMAT` or older than
        :data:`OLDEST_FORMAT`.
    """
    stored = value_format(blob)
    check_readable(stored, "a bucket's state value")
    if stored == 0:
        snapshot = blob
    else:
        size = int.from_bytes(blob[len(PREFIX) + 1 : _HEADER], "big")
        snapshot = pa.decompress(blob[_HEADER:], decompressed_size=size, codec=_CODEC, asbytes=True)
    for format_ in range(stored, FORMAT):
        migrate = MIGRATIONS.get(format_)
        if migrate is not None:
            snapshot = migrate(snapshot)
    return snapshot


def check_readable(stored: int, what: str, written_by: str | None = None) -> None:
    """Refuse ``what`` (a value, a checkpoint) in state format ``stored`` unless this floodmark reads it.

    :raises StateFormatError: naming both floodmarks' formats.
    """
    if stored > FORMAT:
        by = f" (written by floodmark {written_by})" if written_by else ""
        raise StateFormatError(
            f"{what} holds floodmark state format {stored}{by}; this floodmark ({__version__}) reads formats "
            f"{OLDEST_FORMAT} to {FORMAT}: run the query with a floodmark that reads format {stored}, or start "
            "from a new checkpoint"
        )
    if stored < OLDEST_FORMAT:
        raise StateFormatError(
            f"{what} holds floodmark state format {stored}; this floodmark ({__version__}) reads formats "
            f"{OLDEST_FORMAT} to {FORMAT}: finish the query with the floodmark that wrote it, or start from a "
            "new checkpoint"
        )
