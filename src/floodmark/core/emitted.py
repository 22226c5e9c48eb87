"""What one window-operator call produced: panes, late records, bad records."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from floodmark.core.panes import Pane, Timing
from floodmark.core.records import BadRecord, LateRecord
from floodmark.core.values import plain
from floodmark.core.windows import Window


@dataclass
class Emitted:
    """What one operator call produced.

    Panes come in one form, whichever firing policy made them: pandas frames (``pane_frames``, one per firing
    step: columns ``key``, ``window_start``, ``window_end``, ``timestamp``, ``timing``, ``pane_index``,
    ``nonspeculative_index``, ``is_last``, and ``value`` (one aggregate) or ``value.<name>`` (a named
    aggregate, one column per name): numbers as numeric columns, other results as objects), so that runtimes
    never build a Python object per pane. :meth:`all_panes` gives them as :class:`Pane` objects, in order.

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
            value_columns = [c for c in frame.columns if c == "value" or c.startswith("value.")]
            for row in frame.to_dict("records"):
                named = {c[len("value.") :]: plain(row[c]) for c in value_columns if c != "value"}
                value = plain(row["value"]) if "value" in row else named
                panes.append(
                    Pane(
                        key=row["key"],
                        window=Window(int(row["window_start"]), int(row["window_end"])),
                        value=value,
                        timestamp=int(row["timestamp"]),
                        timing=Timing(row["timing"]),
                        pane_index=int(row["pane_index"]),
                        nonspeculative_index=int(row["nonspeculative_index"]),
                        is_last=bool(row["is_last"]),
                    )
                )
        return panes
