"""One local SparkSession for every Spark test (start-up is the expensive part)."""

from __future__ import annotations

import pytest

pyspark = pytest.importorskip("pyspark")

from floodmark.spark import local_session  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    session = local_session("floodmark-tests", cores=2, shuffle_partitions=2)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()
