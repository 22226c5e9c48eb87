"""The JVM window operator (``floodmark.window.WindowOperator`` in floodmark's jar) driven from Python without
Spark, through its plain entry point ``floodmark.window.OperatorMain``, for the differential test against the
Python core (``tests/core/test_jvm_window_operator.py``).

One JVM (:class:`JvmWindowHost`) holds many operators; :class:`JvmWindowOperator` has the moves and gauges of
:class:`floodmark.core.window.WindowOperator` and returns the same :class:`~floodmark.core.emitted.Emitted`, so a
test drives both with one loop. The protocol is JSON lines (``OperatorMain``'s doc comment): a command per line
on the JVM's stdin, an answer per line on its stdout.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from floodmark.core.built_in_spec import built_in_form
from floodmark.core.combine import Partials
from floodmark.core.emitted import SINGLE_RESULT, Emitted, pane_frame
from floodmark.core.keyed_operator import OperatorGauges
from floodmark.core.records import BadRecord, LateReason, LateRecord, RecordBatch
from floodmark.core.spec import WindowSpec
from floodmark.core.windows import Window
from floodmark.jvm import java_executable, packaged_jars
from floodmark.protocol import output


def classpath() -> str | None:
    """floodmark's jar and the Jackson jars pyspark ships (the operator's only dependency), or None without the
    jar (a source tree set up without Maven)."""
    jars = packaged_jars()
    found = importlib.util.find_spec("pyspark")
    if not jars or found is None or found.origin is None:
        return None
    spark_jars = Path(found.origin).parent / "jars"
    return ":".join([*map(str, jars), *map(str, sorted(spark_jars.glob("jackson-*.jar")))])


class JvmWindowHost:
    """One JVM running ``OperatorMain``; :meth:`operator` starts an operator in it. Close it when done."""

    def __init__(self, path: str) -> None:
        self.process = subprocess.Popen(
            [java_executable(), "-cp", path, "floodmark.window.OperatorMain"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ids = itertools.count()

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"the JVM window operator failed: {answer['error']}")
        return answer

    def operator(
        self, spec: WindowSpec, watermark: int, processing_time: int = 0, deferred: tuple[int, int] | None = None
    ) -> JvmWindowOperator:
        """:arg deferred: ``(defer_above, fanout)``: an operator that defers partials within these limits
        (``floodmark.core.segments``' ``DEFER_ABOVE`` and ``FANOUT``), where the spec allows it."""
        return JvmWindowOperator(self, spec, watermark, processing_time, deferred)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


class JvmWindowOperator:
    """A window operator in the JVM with :class:`floodmark.core.window.WindowOperator`'s moves and gauges
    (``roundtrip`` snapshots and restores it, in the JVM)."""

    def __init__(
        self,
        host: JvmWindowHost,
        spec: WindowSpec,
        watermark: int,
        processing_time: int,
        deferred: tuple[int, int] | None = None,
    ) -> None:
        form = built_in_form(spec)
        if form is None:
            raise ValueError(f"the JVM window operator has no built-in form of {spec}")
        self.host, self.spec, self.id = host, spec, str(next(host.ids))
        assert spec.columnar_layout is not None  # every spec with a built-in form has one
        self.layout = spec.columnar_layout
        self.fields = self.layout.value_fields  # the order the JVM's AggregateLayout takes a record's values in
        limits = None if deferred is None else {"defer_above": deferred[0], "fanout": deferred[1]}
        self._move(
            {"op": "new", "spec": form, "watermark": watermark, "processing_time": processing_time, "deferred": limits}
        )

    def drop(self) -> None:
        """Forget the operator in the JVM (one JVM serves a whole test session)."""
        self.host.ask({"id": self.id, "op": "drop"})

    def _move(self, command: dict[str, Any]) -> None:
        """Send a move; its answer (what it emitted, the gauges after it) is kept in :attr:`last`."""
        self.last = self.host.ask({"id": self.id, **command})

    def _emitted(self) -> Emitted:
        answer = self.last
        out = Emitted(accepted=answer["accepted"])
        if answer["panes"]:
            out.pane_frames.append(_pane_frame(answer["panes"], self.layout.single))
        out.late = [
            LateRecord(
                key=r["key"],
                window=Window(r["start"], r["end"]),
                timestamp=r["timestamp"],
                value=r["payload"],
                watermark=r["watermark"],
                lateness=r["lateness"],
                horizon=r["horizon"],
                reason=LateReason(r["reason"]),
            )
            for r in answer["late"]
        ]
        out.bad = [BadRecord(r["key"], r["payload"], r["timestamp"], r["reason"]) for r in answer["bad"]]
        return out

    def add(self, batch: RecordBatch) -> Emitted:
        payload = batch.payload if batch.payload is not None else batch.columns.get(None)
        records = [
            {
                "key": _plain(batch.keys[i]),
                "ts": _timestamp(batch.timestamps[i]),
                "values": [_number(batch.columns[f][i]) for f in self.fields],
                "payload": None if payload is None else _plain(payload[i]),
            }
            for i in range(len(batch))
        ]
        self._move({"op": "add", "records": records})
        return self._emitted()

    def add_partials(self, partials: Partials) -> Emitted:
        """The map side's partials (accumulators in the spec's columnar layout's column order, which the JVM's
        ``AggregateLayout`` keeps)."""
        columns = [partials.accumulators[c.name] for c in self.layout.columns]
        rows = [
            {
                "key": _plain(partials.keys[i]),
                "start": int(partials.starts[i]),
                "end": int(partials.ends[i]),
                "count": int(partials.counts[i]),
                "hold": int(partials.hold[i]),
                "acc": [float(column[i]) for column in columns],
            }
            for i in range(len(partials))
        ]
        self._move({"op": "partials", "partials": rows})
        return self._emitted()

    def advance_watermark(self, watermark: int) -> Emitted:
        self._move({"op": "wm", "to": watermark})
        return self._emitted()

    def advance_processing_time(self, processing_time: int) -> Emitted:
        self._move({"op": "pt", "to": processing_time})
        return self._emitted()

    def roundtrip(self, spec: WindowSpec | None = None) -> None:
        """Snapshot the operator and restore it from the bytes, in the JVM; under ``spec`` where given (a restart
        with changed settings: ``floodmark.driver.definition_changes``)."""
        if spec is None:
            self._move({"op": "roundtrip"})
            return
        self.spec = spec
        self._move({"op": "roundtrip", "spec": built_in_form(spec)})

    def roundtrip_apart(self, spec: WindowSpec | None = None) -> None:
        """Snapshot the operator in parts, keep its segments in a store in the JVM as a runtime keeps them (new ones
        stored, merged ones deleted: a deletion of a segment never stored fails), and restore the head reading
        segments from that store; under ``spec`` where given, as :meth:`roundtrip`."""
        if spec is None:
            self._move({"op": "roundtrip_apart"})
            return
        self.spec = spec
        self._move({"op": "roundtrip_apart", "spec": built_in_form(spec)})

    def segment_infos(self) -> list[tuple[int, int, int, int]]:
        """Each segment's level, rows, earliest window end and oldest arrival, oldest first (as the core's
        ``SegmentInfo``, without the id)."""
        return [tuple(info) for info in self.last["segments"]]

    def windows_of(self, key: Any) -> set[Window]:
        """The open windows of ``key``."""
        self._move({"op": "windows", "key": _plain(key)})
        return {Window(start, end) for start, end in self.last["windows"]}

    @property
    def watermark(self) -> int:
        """The input watermark (ms) the operator was advanced to."""
        return self.last["watermark"]

    def gauges(self) -> OperatorGauges:
        """The gauges the JVM sent with its last answer."""
        gauges = self.last["gauges"]
        return OperatorGauges(
            gauges["output_hold"],
            gauges["oldest_pending"],
            gauges["window_count"],
            gauges["next_watermark_deadline"],
            gauges["next_processing_deadline"],
        )


def _pane_frame(panes: list[dict[str, Any]], single: bool) -> pd.DataFrame:
    """The JVM's panes in the core's pane-frame form (``Emitted.pane_frames``; ``single``: one aggregate, the column
    ``value``)."""
    columns: dict[str, Any] = {
        "key": np.array([p["key"] for p in panes], dtype=object),
        "window_start": np.array([p["start"] for p in panes], dtype=np.int64),
        "window_end": np.array([p["end"] for p in panes], dtype=np.int64),
        output.PANE_TIMESTAMP: np.array([p["timestamp"] for p in panes], dtype=np.int64),
        "timing": np.array([p["timing"] for p in panes], dtype=object),
        "pane_index": np.array([p["pane_index"] for p in panes], dtype=np.int64),
        "nonspeculative_index": np.array([p["nonspeculative_index"] for p in panes], dtype=np.int64),
        "is_last": np.array([p["is_last"] for p in panes], dtype=bool),
    }
    for name in panes[0]["value"]:
        values = np.array([_result(p["value"][name]) for p in panes])
        columns[SINGLE_RESULT if single else name] = values
    return pane_frame(columns, single)


def _result(value: Any) -> Any:
    """A pane result from the JVM's JSON: null is NaN (an empty min, max or mean), and Jackson writes a non-finite
    double as text (``"Infinity"``)."""
    if value is None:
        return math.nan
    return float(value) if isinstance(value, str) else value


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _timestamp(value: Any) -> int | None:
    value = _plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not float(value).is_integer():
        raise ValueError(f"the JVM operator takes whole ms or none as timestamps, not {value!r}")
    return int(value)


def _number(value: Any) -> float | None:
    value = _plain(value)
    return None if value is None else float(value)
