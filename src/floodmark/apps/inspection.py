"""Explaining a run from its files: why has this window not fired (``floodmark explain``)?

A floodmark query leaves everything needed on disk: the pipeline definition
(``pipeline.json``, written by ``demo`` and ``replay``), the control log in its
checkpoint (the coordinator's per-split state after every batch) and the pane
output. :func:`explain_run` restores the coordinator as it was after a batch and
asks :func:`floodmark.core.explain.explain_window` about one key and window; it
also says whether (and in which batch) the pane reached the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floodmark.apps.config import PipelineConfig
from floodmark.apps.outputs import read_output
from floodmark.core.explain import Explanation, explain_window
from floodmark.core.windows import Tumbling, Window
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import BatchController


@dataclass(frozen=True)
class RunExplanation:
    """The core explanation plus what the outputs say about the window."""

    explanation: Explanation
    batch: int
    emitted: list[dict[str, Any]]

    def text(self) -> str:
        lines = [f"as of batch {self.batch}:", self.explanation.text()]
        if self.emitted:
            lines.append("panes in the output for this key and window:")
            lines += [
                f"  batch {p['batch_id']}: {p['timing']} pane #{p['pane_index']}, values "
                + ", ".join(f"{k}={v}" for k, v in p.items() if k.startswith("value:"))
                for p in self.emitted
            ]
        return "\n".join(lines)


def window_at(pipeline: PipelineConfig, start: int) -> Window:
    """The window of ``pipeline`` starting at ``start`` (ms)."""
    size = pipeline.window.size or pipeline.window.gap or 0
    if pipeline.window.kind == "tumbling" and (start - Tumbling(size).offset) % size:
        raise ValueError(f"{start} is not the start of a {size} ms tumbling window")
    return Window(start, start + size)


def explain_run(
    run: str | Path, key: tuple[Any, ...] | Any, window_start: int, batch: int | None = None
) -> RunExplanation:
    """Explain ``key``'s window starting at ``window_start`` as the run stood after ``batch`` (default: the last)."""
    run = Path(run)
    config_path = run / "pipeline.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path} not found: give the output directory of floodmark demo or replay")
    pipeline = PipelineConfig.from_file(config_path)
    log = ControlLog(run / "checkpoint" / "floodmark" / "control")
    controller = BatchController(log, pipeline.strategy())
    latest = log.latest_seq()
    if latest is None:
        raise LookupError(f"{run} has no control log: the query never ran")
    # Entry N+1 is what the driver decided after batch N.
    seq = latest if batch is None else batch + 1
    watermarks = controller.watermarks_at(seq)
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    window = window_at(pipeline, window_start)
    explanation = explain_window(pipeline.window_spec(), key, window, watermarks)
    panes = read_output(run, "panes")
    emitted: list[dict[str, Any]] = []
    if not panes.empty:
        keys = key if isinstance(key, tuple) else (key,)
        mask = panes["window_start"] == window_start
        for column, value in zip(pipeline.key_by, keys, strict=True):
            mask &= panes[column].astype(str) == str(value)
        if batch is not None:
            mask &= panes["batch_id"] <= batch
        for row in panes[mask].sort_values("batch_id").to_dict("records"):
            row.update({f"value:{name}": row[name] for name in pipeline.aggregations})
            emitted.append(row)
    return RunExplanation(explanation, seq - 1, emitted)
