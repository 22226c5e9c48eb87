"""A real single-node Apache Kafka broker on loopback, for tests, demos and benchmarks.

:class:`KafkaBroker` formats a fresh storage folder and starts ``kafka.Kafka`` (the broker's own main class,
from the jars ``scripts/setup.sh`` fetches) in KRaft mode, broker and controller in one process, listening on
127.0.0.1 on free ports. It is the real server, not a mock: topics, partitions, offsets, consumer positions
and the wire protocol are Kafka's. It has four client listeners: PLAINTEXT (:attr:`KafkaBroker.bootstrap_servers`),
SASL_PLAINTEXT with SCRAM-SHA-512 (:attr:`KafkaBroker.sasl_bootstrap_servers`, the user :data:`SASL_USER`, whose
settings for Spark's Kafka clients are :meth:`KafkaBroker.sasl_options`), and the same two over TLS: SSL and
SASL_SSL (:meth:`KafkaBroker.tls_bootstrap_servers`, :meth:`KafkaBroker.tls_options`), with a certificate for
127.0.0.1 signed by an authority the broker makes at its first start (:mod:`floodmark_dev.tls`: keytool, nothing
fetched). The helper's own clients are ``confluent-kafka``'s (librdkafka), on the PLAINTEXT listener::

    with KafkaBroker() as broker:
        broker.create_topic("events", partitions=3)
        broker.produce("events", ['{"timestamp": 1}'], partition=0)
        records = broker.consume("events")        # everything the topic holds now

In pytest, ``kafka_broker = kafka_broker_fixture()`` in a ``conftest.py`` gives a session-wide broker.
The broker's own log goes to ``<work dir>/broker.log`` (warnings and errors only), not to the console.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floodmark.jvm import KAFKA_BROKER, java_executable, require_jars
from floodmark_dev.processes import free_port, tail
from floodmark_dev.tls import Certificates, make_certificates

CLIENT_LOG = logging.getLogger("floodmark_dev.kafka.client")
"""Where the clients' (librdkafka's) own messages go: not the console (a broker still starting refuses
connections, and the client would print each retry); attach a handler to see them."""
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False

LOG_CONFIG = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
"""


SASL_MECHANISM = "SCRAM-SHA-512"
SASL_USER, SASL_PASSWORD = "floodmark", "floodmark-secret"
"""The user the SASL listener knows (stored as a SCRAM credential when the storage is formatted)."""


@dataclass(frozen=True)
class KafkaRecord:
    """One record read from a topic. ``timestamp_ms``: the record's Kafka timestamp (ms since the epoch)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()

    def text(self) -> str:
        """The value as UTF-8 text (undecodable bytes replaced)."""
        return (self.value or b"").decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.text())


class KafkaBroker:
    """A single-node KRaft Kafka broker+controller on loopback (see the module docstring).

    :arg work_dir: where the storage, configuration and log go (default: a temporary folder removed on stop).
    :arg heap: the broker JVM's maximum heap.
    """

    def __init__(self, work_dir: str | Path | None = None, heap: str = "512m") -> None:
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="floodmark-kafka-"))
        self.heap = heap
        self.port = 0
        self.sasl_port = 0
        self.ssl_port = 0
        self.sasl_ssl_port = 0
        self._controller_port = 0
        self.certificates: Certificates | None = None
        """The TLS listeners' authority and certificate (made at the first start, kept across restarts)."""
        self.process: subprocess.Popen | None = None
        self._admin_client = None
        self._producer = None

    # ------------------------------------------------------------- lifecycle
    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the broker's client listener (what Spark's ``kafka.bootstrap.servers`` takes)."""
        if not self.port:
            raise RuntimeError("the broker is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``host:port`` of the SASL_PLAINTEXT listener (SCRAM-SHA-512; :meth:`sasl_options` to log in)."""
        if not self.sasl_port:
            raise RuntimeError("the broker is not started")
        return f"127.0.0.1:{self.sasl_port}"

    @staticmethod
    def sasl_options(user: str = SASL_USER, password: str = SASL_PASSWORD) -> dict[str, str]:
        """The ``kafka.*`` options with which Spark's Kafka source and sink (and floodmark's Kafka functions) log in
        to the SASL listener as ``user``."""
        module = "org.apache.kafka.common.security.scram.ScramLoginModule"
        login = f'{module} required username="{user}" password="{password}";'
        return {
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": SASL_MECHANISM,
            "kafka.sasl.jaas.config": login,
        }

    def tls_bootstrap_servers(self, sasl: bool = False) -> str:
        """``host:port`` of the SSL listener, or with ``sasl`` of the SASL_SSL one (SCRAM-SHA-512 over TLS)."""
        port = self.sasl_ssl_port if sasl else self.ssl_port
        if not port:
            raise RuntimeError("the broker is not started")
        return f"127.0.0.1:{port}"

    def tls_options(self, sasl: bool = False, truststore: Certificates | None = None) -> dict[str, str]:
        """The ``kafka.*`` options with which Spark's Kafka clients reach the SSL listener (``sasl``: the SASL_SSL
        one, logged in as :data:`SASL_USER`), trusting the broker's authority, or ``truststore``'s instead."""
        if self.certificates is None:
            raise RuntimeError("the broker is not started")
        options = (truststore or self.certificates).client_options()
        if sasl:
            return {**self.sasl_options(), **options, "kafka.security.protocol": "SASL_SSL"}
        return {**options, "kafka.security.protocol": "SSL"}

    @property
    def log_path(self) -> Path:
        return self.work_dir / "broker.log"

    def start(self, timeout_s: float = 90.0) -> KafkaBroker:
        """Format storage, start the broker and return once it answers metadata requests. After :meth:`kill` this
        starts it again on its storage and ports (a broker that crashed and came back)."""
        if self.process is not None:
            raise RuntimeError("the broker is already started")
        classpath = os.pathsep.join(str(jar) for jar in require_jars(KAFKA_BROKER))
        if not self.port:
            self.port, self.sasl_port, self._controller_port = free_port(), free_port(), free_port()
            self.ssl_port, self.sasl_ssl_port = free_port(), free_port()
        controller_port = self._controller_port
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.certificates is None:
            self.certificates = make_certificates(self.work_dir / "tls")
        config = self.work_dir / "server.properties"
        config.write_text(self._server_properties(controller_port))
        log_config = self.work_dir / "log4j2.properties"
        log_config.write_text(LOG_CONFIG.format(log=self.log_path))
        java = [java_executable(), f"-Xmx{self.heap}", f"-Dlog4j2.configurationFile={log_config}", "-cp", classpath]
        # A KRaft node needs formatted storage (a cluster id and the metadata version) before its first start.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        # "--cluster-id=<id>": an id may start with "-" (base64url), which "-t <id>" would take for an option.
        format_args = ["format", f"--cluster-id={cluster_id}", f"--config={config}", "--ignore-formatted"]
        # The SASL listener's user, in the cluster's metadata from the start (KRaft keeps SCRAM credentials there).
        format_args.append(f"--add-scram={SASL_MECHANISM}=[name={SASL_USER},password={SASL_PASSWORD}]")
        # A restart (after kill) finds its storage formatted, with the cluster id it keeps.
        if not (self.work_dir / "data" / "meta.properties").exists():
            formatted = subprocess.run([*java, "kafka.tools.StorageTool", *format_args], capture_output=True, text=True)
            if formatted.returncode != 0:
                raise RuntimeError(f"formatting Kafka's storage failed: {formatted.stderr or formatted.stdout}")
        with open(self.work_dir / "broker.out", "ab") as out:
            # Its own process group, so that stopping it never signals the caller (and the caller's Ctrl-C
            # does not kill it before the clean stop below).
            self.process = subprocess.Popen(
                [*java, "kafka.Kafka", str(config)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        atexit.register(self.stop)
        self._wait_until_serving(timeout_s)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker (a clean shutdown, then SIGKILL after ``timeout_s``); remove a temporary work dir."""
        process, self.process = self.process, None
        self._admin_client = None
        self._producer = None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        atexit.unregister(self.stop)
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def kill(self) -> None:
        """``kill -9`` the broker (no clean shutdown); its storage, ports and work dir stay for :meth:`start`."""
        process, self.process = self.process, None
        self._admin_client = None
        self._producer = None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def __enter__(self) -> KafkaBroker:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _server_properties(self, controller_port: int) -> str:
        assert self.certificates is not None
        jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        clients = (
            f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
            f"SSL://127.0.0.1:{self.ssl_port},SASL_SSL://127.0.0.1:{self.sasl_ssl_port}"
        )
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"{clients},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": clients,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": SASL_MECHANISM,
            f"listener.name.sasl_plaintext.{SASL_MECHANISM.lower()}.sasl.jaas.config": jaas,
            f"listener.name.sasl_ssl.{SASL_MECHANISM.lower()}.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.certificates.keystore),
            "ssl.keystore.password": self.certificates.password,
            "ssl.key.password": self.certificates.password,
            "log.dirs": str(self.work_dir / "data"),
            # One node: every internal topic has one replica, and nothing waits for a quorum of others.
            "offsets.topic.replication.factor": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Topics are created on purpose (with their partition count), never by a typo in a reader.
            "auto.create.topics.enable": "false",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _wait_until_serving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process is None or self.process.poll() is not None:
                log = tail(self.work_dir / "broker.out") or tail(self.log_path)
                self.stop()
                raise RuntimeError(f"the Kafka broker exited while starting:\n{log}")
            try:
                self._admin().list_topics(timeout=2)
                return
            except Exception:  # not serving yet: the client raises KafkaException or a timeout
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"the Kafka broker did not serve within {timeout_s} s") from None
                time.sleep(0.2)

    # ---------------------------------------------------------------- topics
    def _client_config(self, **settings: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, "logger": CLIENT_LOG, **settings}

    def _admin(self):
        from confluent_kafka.admin import AdminClient

        # Kept: an admin client destroyed while a request is in flight fails that request.
        if self._admin_client is None:
            self._admin_client = AdminClient(self._client_config())
        return self._admin_client

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create ``name`` with ``partitions`` partitions (replication 1); waits until it exists."""
        from confluent_kafka.admin import NewTopic

        futures = self._admin().create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))]
        )
        futures[name].result(30)
        deadline = time.monotonic() + 30
        while len(self.partitions(name)) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} did not get its {partitions} partitions")
            time.sleep(0.1)

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers, sorted (empty if it does not exist)."""
        metadata = self._admin().list_topics(topic=topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        return sorted(metadata.partitions)

    # ------------------------------------------------------------- producing
    def produce(
        self,
        topic: str,
        values: Iterable[str | bytes | None],
        partition: int | None = None,
        key: str | bytes | None = None,
        timestamp_ms: int | None = None,
    ) -> int:
        """Write ``values`` to ``topic`` (to ``partition``, or as Kafka's partitioner picks); returns how many.

        Waits until the broker has acknowledged every record (``acks=all``, idempotent producer: no duplicates).
        """
        producer = self._shared_producer()
        errors: list[str] = []

        def delivered(error, _message) -> None:
            if error is not None:
                errors.append(str(error))

        count = 0
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        if timestamp_ms is not None:
            extra["timestamp"] = timestamp_ms
        for value in values:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=delivered, **extra)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            count += 1
            producer.poll(0)
        remaining = producer.flush(60)
        if remaining or errors:
            raise RuntimeError(f"producing to {topic} failed: {remaining} undelivered, errors: {errors[:3]}")
        return count

    def _shared_producer(self):
        from confluent_kafka import Producer

        # One producer for the broker's life: an idempotent producer's start-up asks the broker for an id,
        # which takes long on a fresh broker (its coordinator is still loading).
        if self._producer is None:
            self._producer = Producer(self._client_config(**{"enable.idempotence": True, "linger.ms": 5}))
        return self._producer

    # ------------------------------------------------------------- consuming
    def end_offsets(self, topic: str) -> dict[int, int]:
        """``{partition: offset of the next record}`` now."""
        consumer = self._consumer()
        try:
            return {
                p: consumer.get_watermark_offsets(_partition(topic, p), timeout=10)[1] for p in self.partitions(topic)
            }
        finally:
            consumer.close()

    def consume(
        self, topic: str, timeout_s: float = 60.0, isolation_level: str = "read_committed"
    ) -> list[KafkaRecord]:
        """Every record ``topic`` holds now, by partition, offset: up to each partition's end when called, and
        with ``isolation_level="read_committed"`` (librdkafka's default) only what committed transactions and
        non-transactional producers wrote (up to the last stable offset); ``"read_uncommitted"`` also returns
        the records of aborted and open transactions."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError

        ends = {p: end for p, end in self.end_offsets(topic).items() if end > 0}
        consumer = self._consumer(**{"isolation.level": isolation_level, "enable.partition.eof": True})
        records: list[KafkaRecord] = []
        try:
            consumer.assign([_partition(topic, p, OFFSET_BEGINNING) for p in ends])
            # A partition is read when the consumer reports its end: the end offset itself may be a transaction's
            # marker (never delivered), and a read_committed consumer stops at the last stable offset.
            reached: set[int] = set()
            deadline = time.monotonic() + timeout_s
            while len(reached) < len(ends):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read {len(records)} records of {topic}, not all of {ends}")
                for message in consumer.consume(num_messages=10_000, timeout=0.5):
                    error = message.error()
                    if error is not None and error.code() == KafkaError._PARTITION_EOF:
                        reached.add(message.partition())
                        continue
                    if error is not None:
                        raise RuntimeError(f"reading {topic} failed: {error}")
                    if message.offset() >= ends[message.partition()]:
                        continue
                    records.append(
                        KafkaRecord(
                            topic=message.topic(),
                            partition=message.partition(),
                            offset=message.offset(),
                            key=message.key(),
                            value=message.value(),
                            timestamp_ms=message.timestamp()[1],
                            headers=tuple(message.headers() or ()),
                        )
                    )
        finally:
            consumer.close()
        return sorted(records, key=lambda r: (r.partition, r.offset))

    def _consumer(self, **settings: Any):
        from confluent_kafka import Consumer

        return Consumer(
            self._client_config(
                **{"group.id": f"floodmark-reader-{uuid.uuid4().hex}", "enable.auto.commit": False, **settings}
            )
        )


def _partition(topic: str, partition: int, offset: int | None = None):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition) if offset is None else TopicPartition(topic, partition, offset)


def kafka_broker_fixture(scope: str = "session"):
    """A pytest fixture yielding a started :class:`KafkaBroker` (``kafka_broker = kafka_broker_fixture()``)."""
    import pytest

    @pytest.fixture(scope=scope)
    def kafka_broker() -> Iterator[KafkaBroker]:
        with KafkaBroker() as broker:
            yield broker

    return kafka_broker
