"""What one window-operator call produced: panes, late records, bad records; the pane frame's form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from floodmark.core.panes import Pane, Timing
from floodmark.core.records import BadRecord, LateRecord
from floodmark.core.values import plain
from floodmark.core.windows import Window
from floodmark.protocol import output

PANE_FRAME_COLUMNS = ("key", *(name for name, _ in output.PANE_COLUMNS))
"""A pane frame's columns before its results: the key, then the pane columns of the output protocol
(:data:`floodmark.protocol.output.PANE_COLUMNS`), by the names every output gives them."""
SINGLE_RESULT = "value"
"""The result column of a spec of one aggregate (a spec of several names one column per aggregate)."""
_SINGLE = "floodmark.single_result"


def pane_frame(columns: dict[str, Any], single: bool) -> pd.DataFrame:
    """A pane frame: :data:`PANE_FRAME_COLUMNS`, then the results (``single``: the spec's one aggregate, in the
    column :data:`SINGLE_RESULT`; else a column per aggregate, by its name). Numbers are numeric columns, other
    results objects.

    Every array must be a fresh copy (boolean or fancy indexing, or concatenation): ``copy=False`` keeps them as they
    are instead of consolidating them into 2-d blocks, which cost ~0.45 s per million panes.
    """
    frame = pd.DataFrame(columns, copy=False)
    frame.attrs[_SINGLE] = single  # one aggregate named value, or several of which one is named value: told apart
    return frame


@dataclass
class Emitted:
    """What one operator call produced.

    Panes come in one form, whichever firing policy made them: pandas frames (``pane_frames``, one per firing
    step, :func:`pane_frame`: the columns every output gives a pane, under the same names), so that runtimes never
    build a Python object per pane. :meth:`all_panes` gives them as :class:`Pane` objects, in order.

    ``accepted`` counts the (record, window) pairs this call added to windows (each is counted in the panes
    its window fires); with ``late`` (one per pair kept out) and ``bad`` (one per record) it accounts for every
    record handed in: the run's reconciliation.
    """

    late: list[LateRecord] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    pane_frames: list[pd.DataFrame] = field(default_factory=list)
    accepted: int = 0

    def extend(self, other: Emitted) -> None:
        self.late.extend(other.late)
        self.bad.extend(other.bad)
        self.pane_frames.extend(other.pane_frames)
        self.accepted += other.accepted

    def pane_count(self) -> int:
        return sum(len(f) for f in self.pane_frames)

    def all_panes(self) -> list[Pane]:
        """Every pane as a :class:`Pane` object, in order (a missing or NaN value is None)."""
        panes = []
        for frame in self.pane_frames:
            results = list(frame.columns[len(PANE_FRAME_COLUMNS) :])
            single = frame.attrs.get(_SINGLE, results == [SINGLE_RESULT])
            for row in frame.to_dict("records"):
                value = plain(row[SINGLE_RESULT]) if single else {c: plain(row[c]) for c in results}
                panes.append(
                    Pane(
                        key=row["key"],
                        window=Window(int(row["window_start"]), int(row["window_end"])),
                        value=value,
                        timestamp=int(row[output.PANE_TIMESTAMP]),
                        timing=Timing(row["timing"]),
                        pane_index=int(row["pane_index"]),
                        nonspeculative_index=int(row["nonspeculative_index"]),
                        is_last=bool(row["is_last"]),
                    )
                )
        return panes
