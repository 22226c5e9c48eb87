"""Public test utilities.

* :class:`WindowHarness`, :class:`TestStream`: a pipeline's event-time behaviour without Spark.
* :mod:`floodmark.testing.kafka`: a real Kafka broker on loopback (``KafkaBroker``, a pytest fixture).
* :mod:`floodmark.testing.spark_cluster`: a Spark standalone master and workers on loopback.
"""

from floodmark.testing.harness import WindowHarness
from floodmark.testing.test_stream import TestStream

__all__ = ["TestStream", "WindowHarness"]
