"""The tick source's offsets (``spark/sources/ticks.py``'s module docstring), one table of cases for both
implementations:
the JVM source (``jvm/ticks``, through py4j) and the Python data source. End to end, every Spark test runs the
JVM source and ``test_an_idle_query_runs_no_batch_until_something_can_fire`` both."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from floodmark import jvm
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


class SessionWithoutTheJvmSource:
    """Just enough of a classic session for :func:`ticks.tick_rows` when the JVM source cannot load (no Spark)."""

    def __init__(self) -> None:
        self.dataSource = self.readStream = self

    def register(self, source) -> None:
        pass

    def format(self, name: str):
        return self

    def option(self, key: str, value: str):
        return self

    def load(self) -> str:
        return "ticks"


@pytest.mark.parametrize("jar", [False, True])
def test_the_warning_blames_the_installation_without_the_jar_and_the_session_with_it(
    jar, monkeypatch, tmp_path, caplog
):
    """Without the jar in the package there is nothing to give the session: the warning says the installation
    lacks it; with it there, the session was not given it."""
    jars = tmp_path / "site-packages" / "floodmark" / "jars"
    jars.mkdir(parents=True)
    if jar:
        (jars / "floodmark.jar").write_bytes(b"PK")
    monkeypatch.setattr(jvm, "PACKAGED_JARS", jars)
    monkeypatch.setattr(ticks, "jvm_source_loadable", lambda spark: False)
    monkeypatch.delenv(ticks.PYTHON_TICKS_ENV, raising=False)
    with caplog.at_level("WARNING", logger="floodmark"):
        assert ticks.tick_rows(SessionWithoutTheJvmSource(), tmp_path / "ticks.json", 4) == "ticks"
    (warning,) = [r.getMessage() for r in caplog.records if r.name.startswith("floodmark")]
    assert "the Python tick source runs" in warning
    if jar:
        assert "this session cannot load floodmark.ticks.TickSourceProvider" in warning, warning
        assert "installation" not in warning, warning
    else:
        assert "this floodmark installation has no jar" in warning, warning
        assert "its wheel was built without floodmark's JVM code" in warning, warning
        assert "session" not in warning, warning
