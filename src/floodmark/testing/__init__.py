"""Public test utilities: test your pipelines' event-time behaviour without Spark."""

from floodmark.testing.harness import WindowHarness
from floodmark.testing.test_stream import TestStream

__all__ = ["TestStream", "WindowHarness"]
