"""Spark's ``Murmur3Hash`` (``functions.hash``, seed 42) restated in Python for the column types floodmark hashes
itself: bucket labels (:mod:`floodmark.spark.stateful.bucket_layout`) and the panes a stage forwards to a join that
also reads a source, whose rows Spark buckets by this hash (``tests/spark/test_bucket_layout.py`` holds it equal to
Spark's own). Imports nothing of the driver: the executors use it."""

from __future__ import annotations

from collections.abc import Sequence

SEED = 42
"""Spark's seed for ``Murmur3Hash`` (``functions.hash`` and hash partitioning)."""

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK
    return (_rotl(k1, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def murmur3_int(value: int, seed: int = SEED) -> int:
    """Spark's hash of an ``int`` column value (``Murmur3_x86_32.hashInt``), as a signed 32-bit int."""
    return _signed(_fmix(_mix_h1(seed & _MASK, _mix_k1(value & _MASK)), 4))


def murmur3_string(text: str, seed: int = SEED) -> int:
    """Spark's hash of a ``string`` column value (``Murmur3_x86_32.hashUnsafeBytes`` over its UTF-8 bytes:
    little-endian 4-byte words, then each remaining byte alone, sign-extended), as a signed 32-bit int."""
    data = text.encode("utf-8")
    h1 = seed & _MASK
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i : i + 4], "little")))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _MASK))
    return _signed(_fmix(h1, len(data)))


def murmur3_long(value: int, seed: int = SEED) -> int:
    """Spark's hash of a ``long`` column value (``Murmur3_x86_32.hashLong``: the low 4 bytes, then the high 4), as a
    signed 32-bit int."""
    word = value & 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(_mix_h1(seed & _MASK, _mix_k1(word & _MASK)), _mix_k1(word >> 32))
    return _signed(_fmix(h1, 8))


HASHED_TYPES = {"tinyint": "int", "smallint": "int", "int": "int", "boolean": "int", "bigint": "long", "string": "str"}
"""The Spark types (``simpleString``) whose ``functions.hash`` :func:`spark_hash` restates, by how it hashes them."""


def spark_hash(values: Sequence[object], types: Sequence[str], seed: int = SEED) -> int:
    """Spark's ``hash(c1, c2, ...)`` of one row (``values`` of Spark types ``types``, each in
    :data:`HASHED_TYPES`): each value hashed with the previous result as its seed, a null leaving it unchanged."""
    h = seed
    for value, kind in zip(values, types, strict=True):
        if value is None or value != value:  # None, NaN (a null that crossed as float)
            continue
        how = HASHED_TYPES[kind]
        if how == "str":
            h = murmur3_string(str(value), h)
        elif how == "long":
            h = murmur3_long(int(value), h)
        else:
            h = murmur3_int(int(value), h)
    return h
