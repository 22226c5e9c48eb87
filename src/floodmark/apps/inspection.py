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
from floodmark.core.explain import Explanation
from floodmark.core.pipeline import WindowedStage
from floodmark.core.windows import Tumbling, Window
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_SOURCE, AGGREGATION_STAGE, KEPT_ENTRIES, Controller, SourceSettings
from floodmark.driver.explain import explain_stage


@dataclass(frozen=True)
class RunExplanation:
    """The core explanation plus what the outputs say about the window."""

    explanation: Explanation
    batch: int
    emitted: list[dict[str, Any]]

    def text(self) -> str:
        lines = [f"as of the end of batch {self.batch}:", self.explanation.text()]
        if not self.emitted:
            lines.append(f"no pane in the output for this key and window up to batch {self.batch}.")
        else:
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
    """Explain ``key``'s window starting at ``window_start`` as the run stood at the end of ``batch`` (default:
    the last).

    As of the end of batch N: the watermark batch N ran with (control entry N) is the one its panes were fired
    with, so the status follows it and the panes of batches up to N are listed; the sources' state is the one
    after batch N (entry N+1), and a window only that state covers is ``DUE`` in batch N+1.

    :raises FileNotFoundError: ``run`` is not a run's output directory.
    :raises LookupError: the run has no batch ``batch`` (the message names the batches it has).
    :raises ValueError: ``key`` does not fit the run's key columns, or ``window_start`` is not a window's start.
    """
    run = Path(run)
    config_path = run / "pipeline.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path} not found: give the output directory of floodmark demo or replay")
    pipeline = PipelineConfig.from_file(config_path)
    keys = key if isinstance(key, tuple) else (key,)
    panes = read_output(run, "panes")
    if len(keys) != len(pipeline.key_by):
        example = "" if panes.empty else f" (e.g. {','.join(str(panes[c].iloc[0]) for c in pipeline.key_by)})"
        raise ValueError(
            f"key {','.join(map(str, keys))} has {len(keys)} value(s) but the run is keyed by "
            f"{len(pipeline.key_by)} column(s), {', '.join(pipeline.key_by)}: give one value per column, "
            f"comma-separated in that order{example}"
        )
    window = window_at(pipeline, window_start)
    log = ControlLog(run / "checkpoint" / "floodmark" / "control")
    batch = _batch_to_explain(run, log.seqs(), batch)
    controller = Controller.of_aggregation(log, SourceSettings(pipeline.strategy()))
    stage = WindowedStage(AGGREGATION_STAGE, AGGREGATION_SOURCE, pipeline.window_spec(), pipeline.key_by)
    explanation = explain_stage(controller, stage, keys[0] if len(keys) == 1 else keys, window, batch)
    emitted: list[dict[str, Any]] = []
    if not panes.empty:
        mask = (panes["window_start"] == window_start) & (panes["batch_id"] <= batch)
        for column, value in zip(pipeline.key_by, keys, strict=True):
            mask &= panes[column].astype(str) == str(value)
        for row in panes[mask].sort_values("batch_id").to_dict("records"):
            row.update({f"value:{name}": row[name] for name in pipeline.aggregations})
            emitted.append(row)
    return RunExplanation(explanation, batch, emitted)


def _batch_to_explain(run: Path, seqs: list[int], batch: int | None) -> int:
    """``batch``, or the run's last, checked against the control entries kept (batch N needs N and N+1)."""
    if not seqs:
        raise LookupError(f"{run} has no control log: the query never ran")
    first, last = seqs[0], seqs[-1] - 1
    if last < first:
        raise LookupError(f"{run}'s query never finished a batch: there is nothing to explain yet")
    if batch is None:
        return last
    if batch > last:
        raise LookupError(
            f"the run has batches {first}..{last}; --batch {batch} is past its end: give one of those, or leave "
            "--batch out for the last"
        )
    if batch < first:
        raise LookupError(
            f"batch {batch} is no longer kept (only the last {KEPT_ENTRIES} batches are): the run has batches "
            f"{first}..{last}; give one of those"
        )
    return batch
