"""A real Spark Connect server on loopback with floodmark's settings, for tests and trying floodmark over Connect.

:class:`ConnectServer` runs ``org.apache.spark.sql.connect.service.SparkConnectServer`` through the installed
pyspark's ``bin/spark-submit`` (``local[cores]``), with :func:`floodmark.spark.connect_server_conf` (floodmark's jar
and session extensions, RocksDB state), the driver and the gRPC service bound to 127.0.0.1 on free ports, and this
interpreter as the server's Python (it must import floodmark: the query's ``foreachBatch`` step runs there)::

    with ConnectServer() as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()

``python -m floodmark_dev.connect_server`` starts one and prints its address until Ctrl-C. The server's log is
``<work_dir>/server.log``; :meth:`~ConnectServer.stop` ends its process group (the server, its Python workers).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from floodmark.jvm import ensure_java
from floodmark_dev.processes import free_port, signal_group, tail
from floodmark_dev.spark_cluster import pyspark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"


class ConnectServer:
    """A Spark Connect server (see the module docstring).

    :arg cores: its ``local[cores]`` master. :arg conf: more settings (they win over floodmark's).
    :arg kafka: Spark's Kafka connector on its classpath too. :arg work_dir: its log and working directory
        (default: a temporary folder removed on stop). :arg python: the server's Python (its ``foreachBatch``
        process and Python workers; default: this interpreter), which must import floodmark.
    """

    def __init__(
        self,
        cores: int = 2,
        conf: Mapping[str, str] | None = None,
        kafka: bool = False,
        work_dir: str | Path | None = None,
        python: str | None = None,
    ) -> None:
        self.cores = cores
        self.python = python or sys.executable
        self.conf = dict(conf or {})
        self.kafka = kafka
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="floodmark-connect-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``: what ``SparkSession.builder.remote`` takes."""
        if not self.port:
            raise RuntimeError("the Connect server is not started")
        return f"sc://{HOST}:{self.port}"

    def start(self, timeout_s: float = 180.0) -> ConnectServer:
        """Start the server; return once its gRPC port accepts connections."""
        from floodmark.jvm.settings import connect_server_conf

        if self.process is not None:
            raise RuntimeError("the Connect server is already started")
        ensure_java()
        atexit.register(self.stop)
        self.port = free_port()
        settings = {
            **connect_server_conf(self.kafka),
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.bindAddress": HOST,
            "spark.driver.host": HOST,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(self.cores),
            "spark.pyspark.python": self.python,
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_log_config()}",
            **self.conf,
        }
        spark_home = pyspark_home()
        command = [
            str(spark_home / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--master",
            f"local[{self.cores}]",
        ]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")  # spark-submit's name for "the class is Spark's own: no application jar"
        env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": HOST, "PYSPARK_PYTHON": self.python}
        with open(self.work_dir / "server.log", "wb") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.work_dir,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        try:
            while not _accepts(self.port):
                if self.process.poll() is not None:
                    raise RuntimeError(f"the Connect server exited while starting:\n{tail(self.log)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the Connect server did not listen in {timeout_s} s; log: {self.log}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def log(self) -> Path:
        return self.work_dir / "server.log"

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server's process group (SIGTERM, SIGKILL after ``timeout_s``); a temporary work dir is removed."""
        process, self.process = self.process, None
        if process is not None:
            signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                signal_group(process, signal.SIGKILL)
                process.wait()
            signal_group(process, signal.SIGKILL)  # Python workers left behind
        atexit.unregister(self.stop)
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ConnectServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _log_config() -> Path:
    """floodmark's log4j2 configuration (warnings only), as its local sessions use."""
    from floodmark.spark.driver.session import LOG_CONFIG

    return LOG_CONFIG


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


if __name__ == "__main__":
    with ConnectServer() as server:
        print(f"Spark Connect server with floodmark at {server.url} (log: {server.log}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
