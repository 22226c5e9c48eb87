"""``python -m floodmark.jvm``: floodmark's JVM artifacts and a Spark Connect server's settings, for Spark's command
lines (``spark-submit --jars``, ``start-connect-server.sh``)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from floodmark import jvm
from floodmark.jvm.settings import connect_server_conf


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m floodmark.jvm [--kafka]``: floodmark's jar (with ``--kafka``, the Kafka connector's too, when
    installed) as a ``--jars`` value; ``--connect-server``: a Spark Connect server's settings
    (:func:`~floodmark.jvm.settings.connect_server_conf`) as ``--conf`` options. Without floodmark's jar: a
    line on stderr that says why (:func:`~floodmark.jvm.missing_jar`) and 1, never an empty value.

    ``spark-submit --jars "$(python -m floodmark.jvm)" job.py``: a JVM that spark-submit starts gets floodmark's
    jar only on its command line (a session builder's spark.jars reaches the executors, not that JVM).
    ``start-connect-server.sh $(python -m floodmark.jvm --connect-server)``: a Spark Connect server's settings.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    kafka = "--kafka" in args
    missing = jvm.missing_jar()
    if missing is not None:
        print(f"floodmark.jvm: no floodmark jar to give Spark: {missing}", file=sys.stderr)
        return 1
    if "--connect-server" in args:
        print(" ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in connect_server_conf(kafka).items()))
    else:
        print(jvm.spark_jars(kafka=kafka))
    return 0
