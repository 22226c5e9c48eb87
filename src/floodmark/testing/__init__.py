"""Public test utilities: :class:`WindowHarness`, :class:`TestStream`, a pipeline's event-time behaviour without
Spark.

The helpers that start real servers for floodmark's own tests (a Kafka broker, a Spark standalone cluster) are
not part of the package: they live in the source tree's ``devtools/floodmark_dev``.
"""

from floodmark.testing.harness import WindowHarness
from floodmark.testing.test_stream import TestStream

__all__ = ["TestStream", "WindowHarness"]
