"""``floodmark demo --kafka``: the clickstream job between real Kafka topics.

It starts an Apache Kafka broker on loopback (``floodmark_dev.kafka.KafkaBroker``, the jars
``scripts/setup.sh`` fetched), feeds the clickstream simulator into the 4-partition topic ``clicks`` as
JSON lines, paced like the embedded demo (one partition per split; split 3 goes silent 60% into the run),
plus two values that are not records at all. The clickstream job (:data:`~floodmark.apps.demo.SEED_001`)
reads the topic with Spark's Kafka source (partition = split, the topic's partitions known from the start)
and writes its panes as the job's text lines to ``results``, late records to ``late-records`` and dead
letters to ``dead-letters`` (JSON). At the end it reads the three topics back, checks the counts against
a straight count of the simulator's records, and prints what ``results`` holds.

The broker's storage and log stay in ``<output>/kafka/`` for a look afterwards; the broker is stopped.

The broker is a development tool, not part of floodmark: ``floodmark_dev`` (``devtools/`` in the source tree,
not in the wheel; ``scripts/setup.sh`` puts it on ``.venv``'s path) is imported when the demo starts, and
without it (floodmark installed from the wheel) the demo stops with :data:`NEEDS_A_CHECKOUT`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console

from floodmark.apps.config import PipelineConfig
from floodmark.apps.demo import DEMO_TICKS_PER_SECOND, SEED_001, DemoResult, finish, prepare_output, summarize
from floodmark.apps.live import LiveView
from floodmark.apps.outputs import write_text_lines
from floodmark.simulator.clickstream import ClickstreamConfig, generate_tick

if TYPE_CHECKING:  # the broker's module is imported when the demo starts: broker_class()
    from floodmark_dev.kafka import KafkaBroker, KafkaRecord

INPUT_TOPIC = "clicks"
RESULTS_TOPIC, LATE_TOPIC, DEAD_LETTER_TOPIC = "results", "late-records", "dead-letters"
VALUE_SCHEMA = "ts LONG, channel STRING, id LONG, behavior STRING"
NOT_RECORDS = ("this is not JSON", '{"ts": "yesterday", "channel": "app"}')
"""Values the producer adds to partition 0 halfway through: they must come out as dead letters, as they were."""
NEEDS_A_CHECKOUT = (
    "floodmark demo --kafka runs only from a development checkout of floodmark: its Kafka broker is a test tool "
    "(floodmark_dev, in the source tree's devtools/, not in the wheel); clone floodmark, run scripts/setup.sh, "
    "then .venv/bin/floodmark demo --kafka (or run floodmark demo without --kafka)"
)
"""Why the demo cannot run without the development tools, and what to do: one line."""


def broker_class() -> type[KafkaBroker]:
    """``floodmark_dev.kafka.KafkaBroker``, imported now; an ``ImportError`` saying :data:`NEEDS_A_CHECKOUT` when
    the development tools are not importable (floodmark installed from its wheel)."""
    try:
        from floodmark_dev.kafka import KafkaBroker
    except ModuleNotFoundError as error:
        if error.name not in ("floodmark_dev", "floodmark_dev.kafka"):
            raise
        raise ImportError(NEEDS_A_CHECKOUT, name=error.name) from None
    return KafkaBroker


class PacedProducer(threading.Thread):
    """Produces the simulator's ticks to ``topic`` at ``ticks_per_second``, split = partition, JSON lines."""

    def __init__(self, broker: KafkaBroker, topic: str, config: ClickstreamConfig, ticks_per_second: float) -> None:
        super().__init__(name="floodmark-demo-producer", daemon=True)
        self.broker, self.topic, self.config, self.ticks_per_second = broker, topic, config, ticks_per_second
        self.produced = 0
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        try:
            for tick in range(self.config.ticks):
                for split in self.config.producing_splits(tick):
                    records = generate_tick(self.config, split, tick).drop(columns="split")
                    lines = records.to_json(orient="records", lines=True).splitlines()
                    self.produced += self.broker.produce(self.topic, lines, partition=split)
                if tick == self.config.ticks // 2:
                    self.produced += self.broker.produce(self.topic, list(NOT_RECORDS), partition=0)
                time.sleep(max(0.0, started + (tick + 1) / self.ticks_per_second - time.monotonic()))
        except BaseException as error:  # reported by the demo, which then stops the query
            self.error = error
        finally:
            self.done.set()


def pane_frame(records: list[KafkaRecord], value_columns: list[str]) -> pd.DataFrame:
    """Pane rows from the results topic: the dedupe key (header) plus the values (the line's last fields)."""
    rows = []
    for record in records:
        headers = dict(record.headers)
        row = json.loads(headers["floodmark-pane-id"])
        values = record.text().split()[-len(value_columns) :]
        row.update({name: float(value) for name, value in zip(value_columns, values, strict=True)})
        row["batch_id"] = int(headers["floodmark-batch-id"])
        rows.append(row)
    return pd.DataFrame(rows)


def json_frame(records: list[KafkaRecord]) -> pd.DataFrame:
    return pd.DataFrame([record.json() for record in records])


def run_kafka_demo(
    output: Path,
    simulator: ClickstreamConfig | None = None,
    pipeline: PipelineConfig = SEED_001,
    ticks_per_second: float = DEMO_TICKS_PER_SECOND,
    live: bool = True,
    console: Console | None = None,
    timeout_s: float = 600.0,
) -> DemoResult:
    """Run the Kafka demo into ``output`` (replaced if it holds an earlier demo); returns what it produced."""
    broker_type = broker_class()  # before anything else: without the development tools nothing can run
    from floodmark.spark import Outputs, local_session, read_kafka, topic_partitions

    console = console or Console()
    simulator = simulator or ClickstreamConfig.demo()
    pipeline = pipeline.model_copy(update={"split": "partition"})
    output = Path(output)
    prepare_output(output, pipeline, simulator)
    started = time.monotonic()
    console.print("[bold]floodmark demo --kafka[/]: starting a Kafka broker on loopback and local Spark")
    with broker_type(work_dir=output / "kafka") as broker:
        broker.create_topic(INPUT_TOPIC, partitions=simulator.splits)
        for topic in (RESULTS_TOPIC, LATE_TOPIC, DEAD_LETTER_TOPIC):
            broker.create_topic(topic)
        console.print(f"broker {broker.bootstrap_servers}: topic {INPUT_TOPIC} ({simulator.splits} partitions)")
        spark = local_session("floodmark-demo-kafka", cores=2, shuffle_partitions=2)
        source = read_kafka(spark, broker.bootstrap_servers, INPUT_TOPIC, schema=VALUE_SCHEMA)
        aggregation = pipeline.aggregation(
            source, known_splits=topic_partitions(spark, broker.bootstrap_servers, INPUT_TOPIC)
        )
        outputs = Outputs.kafka(
            broker.bootstrap_servers, RESULTS_TOPIC, LATE_TOPIC, DEAD_LETTER_TOPIC, pane_format="text"
        )
        view = LiveView("clickstream from Kafka: 1-minute counts per (channel, behavior)", console=console)
        producer = PacedProducer(broker, INPUT_TOPIC, simulator, ticks_per_second)
        handle = aggregation.start(
            str(output / "checkpoint"),
            outputs,
            trigger_interval="1 second",
            listeners=[view] if live else [view.totals.add],
        )
        try:
            # Paced from the query's first batch on (Spark's start-up takes seconds): the records then arrive
            # over the run as in the embedded demo, not all in the first batch.
            handle.await_batches(1, timeout_s)
            producer.start()
            finish(handle, view if live else None, timeout_s, exhausted=producer.done.is_set)
        finally:
            handle.stop()
            if producer.is_alive():
                producer.done.wait(timeout_s)
        if producer.error is not None:
            raise RuntimeError(f"producing the simulator's records failed: {producer.error}")
        results = broker.consume(RESULTS_TOPIC)
        value_columns = list(pipeline.aggregations)
        result = DemoResult(
            output=output,
            pipeline=pipeline,
            simulator=simulator,
            panes=pane_frame(results, value_columns),
            late=json_frame(broker.consume(LATE_TOPIC)),
            dead_letter=json_frame(broker.consume(DEAD_LETTER_TOPIC)),
            reports=list(handle.reports),
            seconds=time.monotonic() - started,
        )
    result.files["results"] = write_text_lines(result.panes, pipeline.key_by, value_columns, output / "results.txt")
    result.files["kafka log"] = output / "kafka" / "broker.log"
    lines = [record.text() for record in results]
    shown = "\n".join(f"  {line}" for line in lines[:12])
    result.summary = "\n".join(
        [
            f"topic {RESULTS_TOPIC} holds {len(lines):,} lines (one per pane), the first:",
            shown,
            f"{producer.produced:,} values produced to topic {INPUT_TOPIC}",
            summarize(result, view.totals, late_in=f"topic {LATE_TOPIC}", dead_in=f"topic {DEAD_LETTER_TOPIC}"),
        ]
    )
    (output / "summary.txt").write_text(result.summary + "\n")
    return result
