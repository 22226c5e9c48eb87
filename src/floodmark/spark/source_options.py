"""The options of the streaming sources a DataFrame reads, found in its plan: how floodmark finds its own sources
(the Kafka source's alignment key, the list of files read in order) in a DataFrame the user transformed."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame

from floodmark.spark.connect import is_connect

SOURCE_OPTIONS = "floodmark.SourceOptions"
"""The JVM class (in floodmark's jar) that finds them in a classic session's plan."""


def option_values(frame: DataFrame, name: str) -> list[str]:
    """The values of option ``name`` of every streaming source ``frame``'s plan reads (over Spark Connect, in the
    relation the client would send; in a classic session, through floodmark's jar: none without it)."""
    if is_connect(frame.sparkSession):
        relation = frame._plan.plan(frame.sparkSession.client)  # type: ignore[attr-defined]
        return _option_values(relation, name)
    jvm = frame.sparkSession.sparkContext._jvm  # type: ignore[attr-defined]
    if not jvm.org.apache.spark.util.Utils.classIsLoadable(SOURCE_OPTIONS):
        return []
    return [str(value) for value in json.loads(jvm.floodmark.SourceOptions.valuesIn(frame._jdf, name))]


def _option_values(message: Any, name: str) -> list[str]:
    """The values of option ``name`` in every string map of a Spark Connect relation (a protobuf message) and the
    messages it holds: a data source's options are such a map."""
    found = []
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type == field.TYPE_STRING and name in value:
                found.append(value[name])
            continue
        for item in value if field.label == field.LABEL_REPEATED else [value]:
            found.extend(_option_values(item, name))
    return found
