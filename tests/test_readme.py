"""The README's Python blocks run as written, each in a fresh interpreter (so that no earlier import helps).

A block runs in a temporary working directory holding the input it names; a few lines appended after it
(the "check") wait for its query and compare what it wrote with what the input says it must hold. Only the
Kafka block's placeholders (the broker address, a bucket on S3, its topics) are replaced: by the test broker, a
local folder and topics of this test's own.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from readme_blocks import BLOCKS, CHECK_PANES, KAFKA_CONTEXT, MINUTE, clicks, run_block, window_counts


def test_the_harness_example():
    block = BLOCKS["Example: test a window's behaviour without Spark"]
    check = """
import json
print(json.dumps({"panes": [[p.timing.name, list(p.value)] for p in h.panes],
                  "late": [r.value for r in h.late]}))
"""
    out = json.loads(run_block(block + check, Path.cwd()))
    assert out == {"panes": [["EARLY", ["a", "b", "c"]], ["ON_TIME", ["d"]], ["LATE", ["e"]]], "late": ["f"]}


@pytest.mark.spark
def test_the_pipeline_in_20_lines(tmp_path):
    block = BLOCKS["The pipeline in 20 lines"]
    rows = clicks()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clicks.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes="out/panes", keys=("channel", "behavior"), value="count")
    out = json.loads(run_block(block + check, tmp_path))
    assert out == window_counts(rows, ("channel", "behavior"))


@pytest.mark.spark
def test_the_job_over_spark_connect(tmp_path):
    from floodmark_dev.connect_server import ConnectServer

    block = BLOCKS["Over Spark Connect"]
    rows = clicks()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clicks.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes=tmp_path / "out" / "panes", keys=("channel", "behavior"), value="count")
    with ConnectServer(cores=2, work_dir=tmp_path / "server") as server:
        out = json.loads(run_block(block.replace("sc://127.0.0.1:15002", server.url) + check, tmp_path))
    assert out == window_counts(rows, ("channel", "behavior"))


@pytest.mark.spark
def test_several_stages_in_one_query(tmp_path):
    block = BLOCKS["Several stages in one query"]
    starts = range(0, 20 * MINUTE, 5 * MINUTE)
    for name in ("mobile", "console"):
        (tmp_path / name).mkdir()
        # Per user, a session every 5 minutes: 3 events 10 s apart.
        rows = [
            {"ts": start + i * 10_000, "user": user, "partition": 0}
            for start in starts
            for user in ("u1", "u2")
            for i in range(3)
        ]
        (tmp_path / name / "events.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = CHECK_PANES.format(panes="out/means/panes", keys=(), value="mean")
    out = json.loads(run_block(block + check, tmp_path))
    # A session spans its 20 s of events plus the 1-minute gap; with EARLIEST its pane's timestamp is its
    # first event, which puts it in the 2-minute window of its start.
    assert out == {str(start // (2 * MINUTE) * 2 * MINUTE): 80_000.0 for start in starts}


@pytest.mark.spark
def test_joins_and_timers(tmp_path):
    block = BLOCKS["Joins and timers"]
    # Per user, a query every 30 s for 5 minutes, clicked 4 s later when its number is even; the clicks of split 1
    # written 2 minutes of event time behind split 0's (out of order across splits, in order within each).
    queries, clicks_ = [], []
    for user, split in (("u1", 0), ("u2", 1)):
        for n in range(10):
            queries.append({"ts": n * 30_000, "user": user, "query": f"{user}-{n}", "partition": split})
            if n % 2 == 0:
                clicks_.append({"ts": n * 30_000 + 4_000, "user": user, "url": f"{user}-{n}/a", "partition": split})
    for name, rows in (("queries", queries), ("clicks", clicks_)):
        (tmp_path / name).mkdir()
        ordered = sorted(rows, key=lambda r: r["ts"] + (120_000 if name == "clicks" and r["partition"] else 0))
        (tmp_path / name / "rows.json").write_text("".join(json.dumps(r) + "\n" for r in ordered))
    check = """
query.finish_when_input_exhausted(timeout_s=300)
import json
windows = {r.window_start: [r.rows, r.clicks] for r in spark.read.parquet("out/click_through/panes").collect()}
abandoned = sorted((r.user, r.last_query) for r in spark.read.parquet("out/abandoned/panes").collect())
print(json.dumps({"windows": {str(k): v for k, v in sorted(windows.items())}, "abandoned": abandoned}))
"""
    out = json.loads(run_block(block + check, tmp_path))
    # Each minute has 2 queries per user, the one at :00 clicked: 4 joined rows (one per query), 2 with a click.
    assert out == {
        "windows": {str(m * MINUTE): [4, 2] for m in range(5)},
        "abandoned": [["u1", 270_000], ["u2", 270_000]],
    }


@pytest.mark.spark
def test_kafka_in_panes_to_any_sink(tmp_path, kafka_broker):
    block = BLOCKS["Kafka in, panes to any sink"]
    # The broker serves the whole test session: topics of the block's names may exist already.
    source, panes = f"readme-clicks-{uuid.uuid4().hex[:8]}", f"readme-minute-counts-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, partitions=4)
    kafka_broker.create_topic(panes, partitions=1)
    rows = clicks()
    for split in range(4):
        kafka_broker.produce(source, [json.dumps(r) for r in rows if r["partition"] == split], partition=split)
    servers = kafka_broker.bootstrap_servers
    code = block.replace("broker:9092", servers).replace("s3a://bucket/dead", "dead")
    code = code.replace('"clicks"', f'"{source}"').replace('"minute-counts"', f'"{panes}"')
    assert code.count(servers) == 3, "the block's placeholders moved: update this test"
    assert code.count(source) == 2 and code.count(panes) == 1, "the block's topics moved: update this test"
    # What the block's comment says comes from the blocks above it, and the database its table names.
    prelude = KAFKA_CONTEXT
    check = "query.finish_when_input_exhausted(timeout_s=300)\nprint('{}')\n"
    run_block(prelude + code + check, tmp_path)
    lines = sorted(record.text() for record in kafka_broker.consume(panes))
    expected = sorted(
        f"{_minute(int(start))} {_minute(int(start) + MINUTE)} {key.replace('|', ' ')} {count}"
        for key_start, count in window_counts(rows, ("channel", "behavior")).items()
        for key, start in [key_start.rsplit("|", 1)]
    )
    assert lines == expected


def _minute(ms: int) -> str:
    """Seed 001's time format, ``yyyyMMddHHmmss`` in UTC."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y%m%d%H%M%S")


@pytest.mark.spark
def test_install_it_in_your_own_spark(tmp_path):
    """A session of one's own through configure_spark_with_floodmark: floodmark's settings and its jar."""
    check = """
import json
from floodmark.spark.driver.session import check_session
from floodmark.spark.sources.ticks import jvm_source_loadable
check_session(spark)
print(json.dumps([jvm_source_loadable(spark), spark.conf.get("spark.sql.session.timeZone"),
                  spark.conf.get("spark.sql.extensions"), spark.catalog.functionExists("fm_unpack")]))
"""
    out = json.loads(run_block(BLOCKS["Install it in your own Spark"] + check, tmp_path))
    assert out == [True, "UTC", "floodmark.Extensions", True]


def test_every_python_block_of_the_readme_has_a_test():
    tested = {
        "The pipeline in 20 lines",
        "Several stages in one query",
        "Kafka in, panes to any sink",
        "Install it in your own Spark",
        "Example: test a window's behaviour without Spark",
        "Joins and timers",
        "Over Spark Connect",
    }
    assert set(BLOCKS) == tested
