"""The tick source's offsets (``spark/sources/ticks.py``'s module docstring), one table of cases for both
implementations:
the JVM source (``jvm/ticks``, through py4j) and the Python data source. End to end, every Spark test runs the
JVM source and ``test_an_idle_query_runs_no_batch_until_something_can_fire`` both."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from floodmark.spark.sources import ticks
from floodmark.spark.sources.ticks import TickSchedule, TickStreamReader

FUTURE = 2**62
CASES = [
    # (request file text or None, start seq, latest seq)
    (None, 0, 0),  # nothing asked yet
    ('{"seq": 5, "due": 0}', 0, 5),  # asked, due: a batch
    ('{"seq": 5, "due": 0}', 5, 5),  # already read: no batch
    ('{"seq": 3, "due": 0}', 5, 5),  # offsets never go back
    (f'{{"seq": 5, "due": {FUTURE}}}', 0, 0),  # asked for later: not yet
    ('{"seq": 5, "du', 0, 0),  # half a file (never written so, but harmless)
]


class PythonTicks:
    def __init__(self, path: Path, rows: int) -> None:
        self.reader = TickStreamReader(path, rows)

    def latest(self, start: int) -> int:
        return int(self.reader.latestOffset({"seq": start}, None)["seq"])

    def partitions(self, start: int, end: int) -> int:
        return len(self.reader.partitions({"seq": start}, {"seq": end}))

    def offset_json(self, seq: int) -> str:
        return json.dumps({"seq": seq})


class JvmTicks:
    def __init__(self, spark, path: Path, rows: int) -> None:
        jvm = spark.sparkContext._jvm
        stream = getattr(jvm.floodmark.ticks, "TickSourceProvider$TickStream")
        self.stream = stream(jvm.java.io.File(str(path)).toPath(), rows)

    def _offset(self, seq: int):
        return self.stream.deserializeOffset(json.dumps({"seq": seq}))

    def latest(self, start: int) -> int:
        offset = self.stream.latestOffset(self._offset(start), self.stream.getDefaultReadLimit())
        return int(json.loads(offset.json())["seq"])

    def partitions(self, start: int, end: int) -> int:
        return len(self.stream.planInputPartitions(self._offset(start), self._offset(end)))

    def offset_json(self, seq: int) -> str:
        return self._offset(seq).json()


@pytest.fixture(params=["jvm", "python"])
def source(request, spark, tmp_path):
    path = tmp_path / "ticks.json"
    if request.param == "jvm":
        assert ticks.jvm_source_loadable(spark), "setup builds the package jar; sessions load it"
        return path, JvmTicks(spark, path, 4)
    return path, PythonTicks(path, 4)


@pytest.mark.parametrize(("request_text", "start", "latest"), CASES)
def test_latest_offset(source, request_text, start, latest):
    path, implementation = source
    if request_text is not None:
        path.write_text(request_text)
    assert implementation.latest(start) == latest


def test_a_batch_reads_ticks_only_when_its_offset_moved_and_offsets_are_the_same_json(source):
    _, implementation = source
    assert implementation.partitions(0, 5) == 1
    assert implementation.partitions(5, 5) == 0
    assert implementation.offset_json(7) == '{"seq": 7}'


def test_the_drivers_requests_are_granted_when_due(source):
    path, implementation = source
    schedule = TickSchedule(path)
    schedule.request(0)
    first = implementation.latest(0)
    assert first == schedule.last_seq > 0
    schedule.request(60_000)
    assert implementation.latest(first) == first, "due in a minute: no batch yet"
    time.sleep(0.002)
    schedule.request(0)
    assert implementation.latest(first) == schedule.last_seq > first
