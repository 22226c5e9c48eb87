"""floodmark between Kafka topics: a real broker (floodmark_dev.kafka), Spark's Kafka connector."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest

from floodmark import WatermarkStrategy, WindowSpec, aggregates, windows
from floodmark.spark import (
    EventTimeAggregation,
    FunctionSink,
    Outputs,
    SourceTime,
    TableSink,
    read_kafka,
    topic_partitions,
)
from floodmark.spark.map_side.combiner import UNPARSABLE
from floodmark.spark.outputs.sinks import BATCH_ID_HEADER, PANE_ID_HEADER, KafkaSink, OutputBatch
from floodmark_dev.tls import make_certificates

pytestmark = pytest.mark.spark

SECOND = 1_000
MINUTE = 60 * SECOND
SCHEMA = "timestamp LONG, channel STRING, behavior STRING"


def minute_counts(spark, source, bound=timedelta(seconds=5), known_splits=(), idleness=None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(bound)
    if idleness is not None:
        strategy = strategy.with_idleness(idleness)
    return EventTimeAggregation(
        source,
        event_time="timestamp",
        key_by=["channel", "behavior"],
        spec=WindowSpec(window=windows.Tumbling(timedelta(minutes=1)), aggregate={"count": aggregates.count()}),
        time=SourceTime(strategy, split="partition", known_splits=known_splits),
    )


def event(ts, channel="app", behavior="CLICK"):
    return json.dumps({"timestamp": ts, "channel": channel, "behavior": behavior})


def test_the_broker_helper_serves_topics_on_loopback(kafka_broker):
    kafka_broker.create_topic("helper", partitions=3)
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")
    assert kafka_broker.partitions("helper") == [0, 1, 2]
    assert kafka_broker.produce("helper", ["a", "b"], partition=2) == 2
    kafka_broker.produce("helper", [b"c"], partition=0, key="k")
    records = kafka_broker.consume("helper")
    assert [(r.partition, r.offset, r.text()) for r in records] == [(0, 0, "c"), (2, 0, "a"), (2, 1, "b")]
    assert records[0].key == b"k"
    assert kafka_broker.end_offsets("helper") == {0: 1, 1: 0, 2: 2}


BAD_VALUES = {
    "not json": "not json",
    "truncated": '{"timestamp": 5',
    "wrong type": '{"timestamp": "five", "channel": "app", "behavior": "CLICK"}',
    "empty": "",
    "array": "[1, 2]",
    "not utf-8": b"\xff\xfe\x00",
}


def test_kafka_in_kafka_out_accounts_for_every_produced_record(spark, kafka_broker, tmp_path):
    broker = kafka_broker
    broker.create_topic("clicks", partitions=3)
    for topic in ("minute-counts", "late-clicks", "bad-clicks"):
        broker.create_topic(topic)
    produced = 0
    # Three partitions, each in event-time order; partition 2 then sends records 5 minutes old, after the
    # watermark has passed their windows: late. maxOffsetsPerTrigger spreads the topic over several batches.
    for partition in range(3):
        produced += broker.produce(
            "clicks", [event(s * SECOND, f"ch{partition}") for s in range(0, 600, 2)], partition=partition
        )
    produced += broker.produce("clicks", [event(30 * SECOND, "ch2") for _ in range(7)], partition=2)
    produced += broker.produce("clicks", [event(s * SECOND, "ch2") for s in range(600, 660)], partition=2)
    produced += broker.produce("clicks", list(BAD_VALUES.values()), partition=1)
    no_timestamp = '{ "channel":"app" }'  # parses, but is no record: its dead letter keeps this text (issue 26)
    produced += broker.produce("clicks", [no_timestamp], partition=1)
    # In and out through the SASL_SSL listener (SCRAM-SHA-512 over TLS), the output exactly-once.
    servers, login = broker.tls_bootstrap_servers(sasl=True), broker.tls_options(sasl=True)
    source = read_kafka(spark, servers, "clicks", schema=SCHEMA, options={**login, "maxOffsetsPerTrigger": "200"})
    aggregation = minute_counts(spark, source, known_splits=topic_partitions(spark, servers, "clicks", login))
    outputs = Outputs.kafka(
        servers, "minute-counts", "late-clicks", "bad-clicks", "text", login, transactional_id_prefix="clicks"
    )
    handle = aggregation.run_to_completion(str(tmp_path / "ckpt"), outputs, timeout_s=600)
    assert len(handle.reports) > 3, "several batches"

    panes = broker.consume("minute-counts")
    late = [r.json() for r in broker.consume("late-clicks")]
    bad = [r.json() for r in broker.consume("bad-clicks")]
    counted = sum(int(r.text().split()[-1]) for r in panes)
    assert counted + len(late) + len(bad) == produced, "every produced record: in a pane, late or dead"
    assert len(late) == 7 and {r["reason"] for r in late} == {"EXPIRED"}
    assert len(bad) == len(BAD_VALUES) + 1
    unparsable = sorted(r["record"] for r in bad if r["reason"] == UNPARSABLE)
    expected = sorted(v if isinstance(v, str) else "base64://4A" for v in BAD_VALUES.values())
    assert unparsable == expected, "the original text of each unparsable value"
    assert [(r["reason"], r["record"]) for r in bad if r["reason"] != UNPARSABLE] == [
        ("missing timestamp", no_timestamp)
    ]
    # Seed 001's lines; one pane per window and key (AfterWatermark), each with its dedupe key.
    assert panes[0].text().split()[:2] == ["19700101000000", "19700101000100"]
    pane_ids = [dict(r.headers)[PANE_ID_HEADER] for r in panes]
    assert len(set(pane_ids)) == len(panes) == 3 * 10 + 1
    assert {json.loads(r.key)["channel"] for r in panes} == {"ch0", "ch1", "ch2"}


def test_kafka_sink_messages_keys_and_headers_batch_after_batch(spark, kafka_broker):
    panes = spark.createDataFrame(
        [("app", 0, 60_000, 0, 3.0, 1.5), ("web", 60_000, 120_000, 1, None, 2.0)],
        "channel STRING, window_start LONG, window_end LONG, pane_index INT, total DOUBLE, mean DOUBLE",
    )
    late = spark.createDataFrame([("app", 5, None)], "channel STRING, event_time LONG, note STRING")
    for topic in ("sink-text", "sink-json"):
        kafka_broker.create_topic(topic)
    text, json_sink = (  # over TLS, at least once (the exactly-once sink is tested over SASL_SSL above)
        KafkaSink(kafka_broker.tls_bootstrap_servers(), "sink-text", "text", kafka_broker.tls_options()),
        KafkaSink(kafka_broker.tls_bootstrap_servers(), "sink-json", options=kafka_broker.tls_options()),
    )
    for batch_id in (4, 5):  # the same sink twice: its columns are built once, the batch id header is not
        text.write(OutputBatch("panes", panes, batch_id, ("channel",), ("total", "mean")))
        json_sink.write(OutputBatch("late", late, batch_id, ("channel",)))
    lines = kafka_broker.consume("sink-text")
    # Seed 001's line: windows in UTC, integral doubles as integers, a null value left out.
    app, web = "19700101000000 19700101000100 app 3 1.5", "19700101000100 19700101000200 web 2"
    assert sorted(r.text() for r in lines) == [app, app, web, web]
    assert sorted(json.loads(r.key)["channel"] for r in lines) == ["app", "app", "web", "web"]
    assert sorted(dict(r.headers)[BATCH_ID_HEADER] for r in lines) == [b"4", b"4", b"5", b"5"]
    first_window = {"channel": "app", "window_start": 0, "window_end": 60_000, "pane_index": 0}
    dedupe_keys = [json.loads(dict(r.headers)[PANE_ID_HEADER]) for r in lines]
    assert sorted(k["window_start"] for k in dedupe_keys) == [0, 0, 60_000, 60_000] and first_window in dedupe_keys
    records = kafka_broker.consume("sink-json")
    assert [r.json() for r in records] == 2 * [{"channel": "app", "event_time": 5, "note": None}]
    assert [dict(r.headers) for r in records] == [{BATCH_ID_HEADER: b"4"}, {BATCH_ID_HEADER: b"5"}]


def test_a_silent_partition_known_from_the_topic_holds_the_watermark(spark, kafka_broker, tmp_path):
    kafka_broker.create_topic("two-of-three", partitions=3)
    for partition in (0, 1):
        kafka_broker.produce("two-of-three", [event(s * SECOND) for s in range(0, 150, 5)], partition=partition)
    partitions = topic_partitions(spark, kafka_broker.bootstrap_servers, "two-of-three")
    assert partitions == ["0", "1", "2"]
    source = read_kafka(spark, kafka_broker.bootstrap_servers, "two-of-three", schema=SCHEMA)
    held = minute_counts(spark, source, known_splits=partitions).start(
        str(tmp_path / "held-ckpt"), str(tmp_path / "held"), trigger_interval="200 milliseconds"
    )
    free = minute_counts(spark, source).start(
        str(tmp_path / "free-ckpt"), str(tmp_path / "free"), trigger_interval="200 milliseconds"
    )
    try:
        held.await_settled()
        free.await_settled()
        # More records in a second batch: an idle query runs a batch only when there is something to do.
        for partition in (0, 1):
            kafka_broker.produce("two-of-three", [event(s * SECOND) for s in range(150, 300, 5)], partition=partition)
        for handle in (held, free):
            while sum(r.records for r in handle.reports) < 120:
                handle.await_batches(1)
            handle.await_settled()
    finally:
        held.stop()
        free.stop()
    assert {r.watermark for r in held.reports[1:]} == {held.reports[0].watermark}, "partition 2 has not spoken"
    assert sum(r.panes for r in held.reports) == 0
    assert sum(r.panes for r in free.reports) > 0, "without the topic's partitions the watermark moves on"
    with pytest.raises(ValueError, match="does not exist"):
        topic_partitions(spark, kafka_broker.bootstrap_servers, "no-such-topic")


def test_table_and_function_sinks(spark, kafka_broker, tmp_path):
    kafka_broker.create_topic("to-tables", partitions=2)
    for partition in (0, 1):
        kafka_broker.produce("to-tables", [event(s * SECOND) for s in range(0, 180, 3)], partition=partition)
    kafka_broker.produce("to-tables", ["oops"], partition=0)
    source = read_kafka(spark, kafka_broker.bootstrap_servers, "to-tables", schema=SCHEMA)
    seen: list[tuple[int, list]] = []
    dead = FunctionSink(lambda rows, batch_id: seen.append((batch_id, [r.asDict() for r in rows.collect()])))
    table = TableSink("floodmark_test_panes", location=str(tmp_path / "table"))
    outputs = Outputs(panes=table, late=FunctionSink(lambda rows, batch_id: None), dead_letter=dead)
    minute_counts(spark, source).run_to_completion(str(tmp_path / "ckpt"), outputs, timeout_s=600)
    panes = spark.table("floodmark_test_panes").toPandas()
    assert sorted(panes["window_start"]) == [0, MINUTE, 2 * MINUTE]
    assert panes["count"].sum() == 120
    assert [row["record"] for _, rows in seen for row in rows] == ["oops"]
    # A replayed batch overwrites its own partition: the table keeps one copy of it.
    batch_id = int(panes["batch_id"].iloc[0])
    again = spark.table("floodmark_test_panes").filter(f"batch_id = {batch_id}").drop("batch_id").localCheckpoint()
    table.write(OutputBatch("panes", again, batch_id, ("channel", "behavior"), ("count",)))
    assert spark.table("floodmark_test_panes").count() == len(panes)
    # A driver restart with Spark's in-memory catalog: the table is gone from the catalog, its files are
    # not. The next batch registers them again (partitions too) and adds its own.
    spark.sql("DROP TABLE floodmark_test_panes")  # an external table: the files stay
    table.write(OutputBatch("panes", again, 99, ("channel", "behavior"), ("count",)))
    restored = spark.table("floodmark_test_panes").toPandas()
    assert len(restored) == len(panes) + len(again.collect()) and 99 in set(restored["batch_id"])
    assert Counter(s.guarantee for s in (table, dead))["exactly-once"] == 1
    spark.sql("DROP TABLE floodmark_test_panes")


def test_a_batch_is_one_spark_job_when_its_panes_go_to_kafka_or_a_table(spark, kafka_broker, tmp_path):
    """The pane write is the job that computes the batch (its observation brings the batch's reports to the
    driver): one Spark job per batch with at-least-once Kafka or a table, no no-op write before it; batches
    without panes leave no table partition behind."""
    kafka_broker.create_topic("one-job", partitions=2)
    kafka_broker.create_topic("one-job-panes")
    for partition in (0, 1):
        kafka_broker.produce("one-job", [event(s * SECOND) for s in range(0, 240, 4)], partition=partition)
    nothing = FunctionSink(lambda rows, batch_id: None)  # no late record or dead letter in this input
    sinks = {
        "kafka": KafkaSink(kafka_broker.bootstrap_servers, "one-job-panes", "text"),
        "table": TableSink("floodmark_one_job", location=str(tmp_path / "table")),
    }
    for name, panes in sinks.items():
        options = {"maxOffsetsPerTrigger": "40"}
        source = read_kafka(spark, kafka_broker.bootstrap_servers, "one-job", schema=SCHEMA, options=options)
        handle = minute_counts(spark, source).run_to_completion(
            str(tmp_path / f"{name}-checkpoint"), Outputs(panes, nothing, nothing), timeout_s=600
        )
        assert len(handle.reports) > 3, "several batches"
        # Spark runs every job of a streaming query's batches in the job group of the query's run.
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(handle.query.runId))
        assert len(jobs) == len(handle.reports), f"one job per batch with panes to {name}"
    lines = sorted(r.text() for r in kafka_broker.consume("one-job-panes"))
    assert [line.split()[-1] for line in lines] == ["30"] * 4 and len(set(lines)) == 4
    table = spark.table("floodmark_one_job").toPandas()
    assert sorted(table["window_start"]) == [0, MINUTE, 2 * MINUTE, 3 * MINUTE] and table["count"].sum() == 120
    partitions = spark.sql("SHOW PARTITIONS floodmark_one_job").collect()
    assert len(partitions) == table["batch_id"].nunique(), "no partition for a batch without panes"
    spark.sql("DROP TABLE floodmark_one_job")


def test_the_kafka_demo_reads_the_topic_and_writes_three_topics(spark, tmp_path):
    from rich.console import Console

    from floodmark.apps.demo import SEED_001, check_counts
    from floodmark.apps.kafka_demo import NOT_RECORDS, run_kafka_demo
    from floodmark.simulator.clickstream import ClickstreamConfig, generate

    small = ClickstreamConfig(
        seed=3, splits=4, records_per_tick_per_split=30, tick_ms=10_000, ticks=36, idle_split=3, idle_from_tick=18,
        late_burst_tick=24, late_burst_records=20, late_burst_age_ms=400_000, bad_records_per_tick=1,
    )  # fmt: skip
    pipeline = SEED_001.model_copy(update={"idleness": 2_000})
    result = run_kafka_demo(
        tmp_path / "demo", small, pipeline, ticks_per_second=3.0, live=False, console=Console(quiet=True)
    )
    assert check_counts(small, result.panes, result.late, 60_000) == [], "every timestamped record: a pane or late"
    records = generate(small)
    assert len(result.dead_letter) == int(records["ts"].isna().sum()) + len(NOT_RECORDS)
    assert set(NOT_RECORDS) <= set(result.dead_letter["record"]), "the values that are not records, as they were"
    assert len(result.late) > 0 and "counts: exact" in result.summary
    lines = (tmp_path / "demo" / "results.txt").read_text().splitlines()
    assert len(lines) == len(result.panes) and len(lines[0].split()) == 5  # start end channel behavior count
    assert any(r.splits.get("3", (0, False))[1] for r in result.reports), "the silent partition was marked idle"


def test_exactly_once_kafka_sink_commits_each_batch_once(spark, kafka_broker):
    """A transaction per batch with its marker, written through floodmark's data source: a batch written again (a
    replay) is skipped, also by a writer that reads the marker back from Kafka; another query with the same prefix
    is refused by name."""
    kafka_broker.create_topic("eo-panes", partitions=2)
    panes = spark.createDataFrame(
        [("app", 0, 60_000, 0, 3), ("web", 0, 60_000, 0, 2)],
        "channel STRING, window_start LONG, window_end LONG, pane_index INT, n LONG",
    )
    sink = KafkaSink(kafka_broker.bootstrap_servers, "eo-panes", transactional_id_prefix="eo-test")
    assert sink.guarantee.startswith("exactly-once")
    writers = spark.sparkContext._jvm.floodmark.kafka.TransactionalWriter

    def batch(batch_id: int, query_id: str = "query-a") -> OutputBatch:
        return OutputBatch("panes", panes, batch_id, ("channel",), ("n",), stage="counts", query_id=query_id)

    try:
        for batch_id in (0, 1, 1, 0):  # batches 0 and 1, then both again as replays
            sink.write(batch(batch_id))
        writers.closeAll()  # a new driver: the marker comes from Kafka
        sink.write(batch(1))
        records = kafka_broker.consume("eo-panes")
        assert sorted(dict(r.headers)[BATCH_ID_HEADER] for r in records) == [b"0", b"0", b"1", b"1"]
        assert {json.loads(r.key)["channel"] for r in records} == {"app", "web"}
        # Uncommitted reading sees the same: no transaction was aborted.
        assert len(kafka_broker.consume("eo-panes", isolation_level="read_uncommitted")) == 4

        writers.closeAll()
        with pytest.raises(Exception, match="eo-test-counts-panes' holds batch 1 of another query"):
            sink.write(batch(2, "query-b"))
    finally:
        writers.closeAll()


AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Click",
        "fields": [
            {"name": "timestamp", "type": "long"},
            {"name": "channel", "type": "string"},
            {"name": "behavior", "type": "string"},
        ],
    }
)


def avro_values(spark, rows: list[tuple[int, str, str]]) -> list[bytes]:
    """Avro binary of ``rows`` (timestamp, channel, behavior), encoded by Spark's own ``to_avro``."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    frame = spark.createDataFrame(rows, "timestamp LONG, channel STRING, behavior STRING")
    encoded = frame.select(to_avro(F.struct("timestamp", "channel", "behavior"), AVRO_SCHEMA).alias("value"))
    return [bytes(row.value) for row in encoded.collect()]


def test_plain_avro_values_decode_and_bad_ones_keep_their_bytes(spark):
    from floodmark.spark.plan import TEXT, corrupt_record_column
    from floodmark.spark.sources.kafka import parse_avro

    good = avro_values(spark, [(5, "app", "CLICK"), (7, "web", "VIEW")])
    values = spark.createDataFrame([(v,) for v in [*good, b"", b"\x02"]], "value BINARY")
    rows = parse_avro(values, AVRO_SCHEMA, False, (), "test").collect()
    corrupt = corrupt_record_column(spark)
    assert [(r.timestamp, r.channel, r.behavior) for r in rows[:2]] == [(5, "app", "CLICK"), (7, "web", "VIEW")]
    assert [r[corrupt] for r in rows] == [None, None, "base64:", "base64:Ag=="]
    assert rows[0][TEXT].startswith("base64:")
    with pytest.raises(ValueError, match="Avro record schema"):
        parse_avro(values, '"long"', False, (), "test")


def test_confluent_avro_values_from_kafka_and_undecodable_ones_as_dead_letters(spark, kafka_broker, tmp_path):
    import base64

    kafka_broker.create_topic("avro-clicks", partitions=2)
    header = bytes([0]) + (42).to_bytes(4, "big")  # Confluent's wire format: magic byte, schema id
    for partition in range(2):
        rows = [(s * SECOND, f"ch{partition}", "CLICK") for s in range(0, 300, 3)]
        kafka_broker.produce("avro-clicks", [header + v for v in avro_values(spark, rows)], partition=partition)
    bad = [b"\x01" + header[1:] + b"junk", header, avro_values(spark, [(1, "app", "CLICK")])[0]]  # no header last
    kafka_broker.produce("avro-clicks", bad, partition=0)
    source = read_kafka(spark, kafka_broker.bootstrap_servers, "avro-clicks", AVRO_SCHEMA, "confluent-avro")
    aggregation = minute_counts(spark, source, known_splits=["0", "1"])
    handle = aggregation.run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=600)
    from floodmark.apps.outputs import read_output

    panes = read_output(tmp_path / "out", "panes")
    assert int(panes["count"].sum()) == 200
    assert sorted(set(panes["channel"])) == ["ch0", "ch1"]
    dead = read_output(tmp_path / "out", "dead_letter")
    assert sorted(dead["record"]) == sorted(f"base64:{base64.b64encode(v).decode()}" for v in bad)
    assert set(dead["reason"]) == {UNPARSABLE}
    accounted = handle.reconciliation
    assert (accounted.rows_in, accounted.records, accounted.dead_letters) == (203, 200, 3), "every value counted"


def test_wrong_credentials_stop_with_kafkas_own_reason(spark, kafka_broker, tmp_path):
    kafka_broker.create_topic("guarded", partitions=2)
    servers, wrong = kafka_broker.sasl_bootstrap_servers, kafka_broker.sasl_options(password="not-the-password")
    with pytest.raises(
        ConnectionError, match=r"'guarded' at 127\.0\.0\.1.*SaslAuthenticationException.*invalid credentials"
    ):
        topic_partitions(spark, servers, "guarded", wrong)
    assert topic_partitions(spark, servers, "guarded", kafka_broker.sasl_options()) == ["0", "1"]
    source = read_kafka(spark, servers, "guarded", schema=SCHEMA, options=wrong)
    with pytest.raises(Exception, match=r"SaslAuthenticationException.*invalid credentials"):
        minute_counts(spark, source).run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=120)


def test_a_certificate_the_client_does_not_trust_stops_with_kafkas_own_reason(spark, kafka_broker, tmp_path):
    """The SSL listener's certificate is signed by the broker's authority: a client that trusts another one
    (``stranger``) is refused by its own TLS check, and floodmark says so in one line with Kafka's reason."""
    kafka_broker.create_topic("sealed", partitions=2)
    servers = kafka_broker.tls_bootstrap_servers()
    assert topic_partitions(spark, servers, "sealed", kafka_broker.tls_options()) == ["0", "1"]
    stranger = make_certificates(tmp_path / "stranger", "another authority")
    wrong = kafka_broker.tls_options(truststore=stranger)
    refused = r"SslAuthenticationException: SSL handshake failed"
    untrusted = r"; caused by .*unable to find valid certification path"
    with pytest.raises(ConnectionError, match=rf"'sealed' at 127\.0\.0\.1.*{refused}{untrusted}") as raised:
        topic_partitions(spark, servers, "sealed", wrong)
    assert "\n" not in str(raised.value)
    source = read_kafka(spark, servers, "sealed", schema=SCHEMA, options=wrong)
    with pytest.raises(Exception, match=rf"^the floodmark query failed: [\w.]*{refused} \(query\.exception\(\)"):
        minute_counts(spark, source).run_to_completion(str(tmp_path / "ckpt"), str(tmp_path / "out"), timeout_s=120)


def test_watermark_alignment_bounds_the_open_windows_of_a_replay_and_changes_no_pane(spark, kafka_broker, tmp_path):
    """Replaying a topic whose partition 0 starts two hours behind partitions 1-3 (partition 4 is known but
    silent, idle after 2 s): without alignment partitions 1-3 run two hours ahead and their windows wait open
    for partition 0; aligned (10 minutes of drift) they are paused until partition 0 catches up. Same panes,
    no late record either way, a fraction of the open windows."""
    from connect_jobs import produce_skewed, replay

    from floodmark.apps.outputs import read_output

    produced = produce_skewed(kafka_broker, "replay")
    runs = {}
    for name in ("free", "aligned"):
        query = replay(spark, kafka_broker.bootstrap_servers, "replay", tmp_path / name, aligned=name == "aligned")
        panes = read_output(tmp_path / name / "out", "panes")
        runs[name] = (query.reports, sorted(zip(panes["channel"], panes["window_start"], panes["count"], strict=True)))

    (free_reports, free_panes), (aligned_reports, aligned_panes) = runs["free"], runs["aligned"]
    assert aligned_panes == free_panes and sum(p[2] for p in free_panes) == produced, "alignment changes no pane"
    assert sum(r.late for r in free_reports) == sum(r.late for r in aligned_reports) == 0
    free_peak = max(r.open_windows for r in free_reports)
    aligned_peak = max(r.open_windows for r in aligned_reports)
    paused = {split for r in aligned_reports for split in r.paused_splits}
    batches = f"batches {len(free_reports)} vs {len(aligned_reports)}"
    print(f"\npeak open windows: {free_peak} free, {aligned_peak} aligned; {batches}")
    assert paused == {"1", "2", "3"}, "the partitions ahead, never the slowest nor the silent one"
    # Paused, a partition has unread records: it is never idle (measured once with the timeout alone: 1-3 idle in 3
    # batches, released and reading ahead, a peak of 79 open windows; with this rule 55 and 67 in two runs).
    ahead = [(r, s) for r in aligned_reports for s in ("1", "2", "3") if r.split_backlog.get(s)]
    print(f"split-batches of 1-3 with unread records: {len(ahead)}, idle: {sum(r.splits[s][1] for r, s in ahead)}")
    assert len(ahead) >= 20 and not any(r.splits[s][1] for r, s in ahead)
    assert any(r.splits["4"][1] and r.split_backlog.get("4") == 0 for r in aligned_reports), "4: caught up, idle"
    assert not any(r.paused_splits for r in free_reports)
    # Free, a fast partition keeps open all it read while partition 0 was behind (~3.4 minutes of its events per
    # batch for ~17 batches). Aligned, about the drift plus one batch of its records (10 + ~3 minutes), and
    # partition 0 one batch of its own (the whole limit while the others are paused: 12 minutes).
    assert free_peak > 150 and aligned_peak < 80, "the fast partitions' windows no longer wait open"


def test_the_aligned_source_holds_paused_partitions_and_shares_the_read_limit(spark):
    """The offsets arithmetic of floodmark.kafka.AlignedKafkaSource (the JVM side of alignment)."""
    source = spark.sparkContext._jvm.floodmark.kafka.AlignedKafkaSource
    start, available = '{"t":{"0":10,"1":100,"2":50}}', '{"t":{"0":1010,"1":400,"2":50}}'
    # Paused partition 1 stays at its start; the others keep the proposed ends.
    assert json.loads(source.hold(start, available, {1})) == {"t": {"0": 1010, "1": 100, "2": 50}}
    # A limit of 100 goes to partition 0 alone (1 is paused, 2 has nothing): not 100 * 1000 / 1300 of it.
    assert json.loads(source.share(start, available, {1}, 100)) == {"t": {"0": 110, "1": 100, "2": 50}}
    # Shared by what each has to read, never beyond it, at least one record each.
    shared = json.loads(source.share('{"t":{"0":0,"1":0}}', '{"t":{"0":990,"1":10}}', set(), 100))
    assert shared == {"t": {"0": 99, "1": 1}}
    assert json.loads(source.share('{"t":{"0":0,"1":0}}', '{"t":{"0":5,"1":3}}', {7}, 100)) == {"t": {"0": 5, "1": 3}}
    assert source.share(start, available, {0, 1}, 100) is None, "nothing that may be read: the caller falls back"
