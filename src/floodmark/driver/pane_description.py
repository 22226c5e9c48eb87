"""What a stage's pane output holds, written beside it, so a reader can give each window's result.

A query writes ``_floodmark.json`` into each file output of panes (Spark's file readers skip names that start
with ``_``) as it starts: the stage's kind and, for a window stage, how each result column's window value comes
from its panes (:mod:`floodmark.core.window_results`). :func:`floodmark.spark.read_panes` reads it; an output
without one (written by an older floodmark) is read as the latest pane per window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.window_results import ResultFromPanes, results_from_panes
from floodmark.driver import checkpoint_files
from floodmark.driver.checkpoint_files import CheckpointFiles

DESCRIPTION_FILE = "_floodmark.json"

WINDOWS = "windows"
"""A window stage's panes: a window's result may need its panes combined."""
ROWS = "rows"
"""A join or process stage's rows: each row is a result of its own (a pair, a timer's row)."""


@dataclass(frozen=True)
class PaneDescription:
    """:ivar stage: the stage's name. :ivar kind: :data:`WINDOWS` or :data:`ROWS`. :ivar accumulation: a window
    stage's accumulation mode. :ivar results: a window stage's result columns and how each combines."""

    stage: str
    kind: str
    accumulation: str | None = None
    results: dict[str, ResultFromPanes] = field(default_factory=dict)

    @classmethod
    def of(cls, stage: WindowedStage | JoinStage | ProcessStage) -> PaneDescription:
        if not isinstance(stage, WindowedStage):
            return cls(stage.name, ROWS)
        return cls(stage.name, WINDOWS, stage.spec.accumulation.value, results_from_panes(stage.spec))

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"stage": self.stage, "kind": self.kind}
        if self.kind == WINDOWS:
            data["accumulation"] = self.accumulation
            data["results"] = {name: result.to_dict() for name, result in self.results.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> PaneDescription:
        results = data.get("results") or {}
        assert isinstance(results, dict)
        return cls(
            str(data["stage"]),
            str(data["kind"]),
            None if data.get("accumulation") is None else str(data["accumulation"]),
            {name: ResultFromPanes(**each) for name, each in results.items()},
        )

    def write(self, files: CheckpointFiles, folder: str) -> None:
        """Into ``folder`` (the pane output's path), replacing the one an earlier start wrote."""
        path = checkpoint_files.join(folder, DESCRIPTION_FILE)
        files.delete(path)
        files.write_once(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def read(cls, files: CheckpointFiles, folder: str) -> PaneDescription | None:
        """The description in ``folder``, None when it has none."""
        text = files.read_text(checkpoint_files.join(folder, DESCRIPTION_FILE))
        return None if text is None else cls.from_dict(json.loads(text))
