"""floodmark's JVM plan nodes, asked for by a hint on a DataFrame (``floodmark.PlanHints`` in its jar).

``frame.hint("floodmark_window_level", ...)`` (the JVM host of a level of window stages) and
``frame.hint("floodmark_partial_aggregate", ...)`` (the JVM map side's partial aggregation) are replaced by the
plan nodes they name while Spark analyses the DataFrame, by a rule of floodmark's session extensions
(``spark.sql.extensions=floodmark.Extensions``). A hint is part of the DataFrame's relation, so the same call works
on a classic session and over Spark Connect, where there is no py4j. A session without floodmark's extensions
would drop the hint silently: :func:`why_unreachable` says so before one is asked for.

Each parameter is a text in URL-safe base64: a Connect server reads a hint's text parameter as a column name,
split at dots, and base64 has none.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from floodmark.jvm.settings import EXTENSIONS

WINDOW_LEVEL = "floodmark_window_level"
"""``floodmark_window_level(plan)``: ``floodmark.host.WindowLevel`` over the carrier rows (``plan``: its JSON)."""
PARTIAL_AGGREGATE = "floodmark_partial_aggregate"
"""``floodmark_partial_aggregate(group, aggregates)``: ``floodmark.combine.PartialAggregate`` (JSON lists of texts)."""


def hinted(frame: DataFrame, name: str, *parameters: Any) -> DataFrame:
    """``frame`` with the hint ``name``: each parameter a text, or a list of texts (sent as JSON)."""
    texts = [value if isinstance(value, str) else json.dumps(list(value)) for value in parameters]
    return frame.hint(name, *[base64.urlsafe_b64encode(t.encode()).decode() for t in texts])


def why_unreachable(spark: SparkSession) -> str | None:
    """Why ``spark`` cannot resolve floodmark's hints (its ``spark.sql.extensions`` lack :data:`EXTENSIONS`), or
    None. A static setting: it is read, not changed, and the same on a Connect server's sessions."""
    classes = [name.strip() for name in (spark.conf.get("spark.sql.extensions", None) or "").split(",")]
    if EXTENSIONS in classes:
        return None
    return (
        f"this session was started without spark.sql.extensions={EXTENSIONS} (floodmark's sessions and "
        "configure_spark_with_floodmark set it; spark-submit and Spark Connect servers need it given)"
    )
