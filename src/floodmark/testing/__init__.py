"""Public test utilities: :class:`WindowHarness`, :class:`TestStream`, a pipeline's event-time behaviour without
Spark; :class:`ProcessHarness`, a keyed process function's.

The helpers that start real servers for floodmark's own tests (a Kafka broker, a Spark standalone cluster) are
not part of the package: they live in the source tree's ``devtools/floodmark_dev``.
"""

from floodmark.testing.harness import WindowHarness
from floodmark.testing.process_harness import ProcessHarness
from floodmark.testing.test_stream import TestStream

__all__ = ["ProcessHarness", "TestStream", "WindowHarness"]
