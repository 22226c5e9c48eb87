"""Why has this window of this stage not fired? Answered from a query's control log, for any stage.

The control log holds, after every batch, each source's coordinator (per-split watermarks, idleness, the
generators' state), each stage's watermarks and each state bucket's last report (its hold among them):
everything :mod:`floodmark.explain.window` needs. :func:`explain_stage` serves a running query
(``FloodmarkQuery.explain``), a stopped one read back from its checkpoint (``Pipeline.explain``) and
``floodmark explain`` on a run's files alike.

As of the end of batch N: the watermark batch N ran with (control entry N) is the one its panes were fired
with, so the status follows it; the sources' and upstream stages' state is the one after batch N (entry N+1),
and a window only that state covers is ``DUE`` in batch N+1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from floodmark.core.join import WindowJoinSpec
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.spec import WindowSpec
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks.coordinator import SourceWatermarks
from floodmark.core.watermarks.graph import StageGraph
from floodmark.core.windows import Window
from floodmark.driver.controller import Controller
from floodmark.explain.window import Explanation, UpstreamReport, explain_stage_window, explain_window
from floodmark.protocol import wire
from floodmark.protocol.control import BucketGauges, ControlEntry


def last_batch(controller: Controller) -> int:
    """The last batch the control log shows finished (its entry and the next one exist).

    :raises LookupError: no batch has finished yet.
    """
    seqs = controller.log.seqs()
    if len(seqs) < 2:
        raise LookupError(f"no batch has finished yet ({controller.log.directory}): there is nothing to explain")
    return seqs[-1] - 1


def windows_of(stage: WindowedStage | JoinStage | ProcessStage) -> WindowSpec | None:
    """The windows a stage's rows wait in: a window stage's spec; a window join's window operator's (its pairs wait in
    windows, which fire as any window does); None for an interval join or a process stage."""
    if isinstance(stage, WindowedStage):
        return stage.spec
    if isinstance(stage, JoinStage) and isinstance(stage.spec, WindowJoinSpec):
        return stage.spec.window_spec()
    return None


def explain_stage(
    controller: Controller,
    stage: WindowedStage | JoinStage | ProcessStage,
    key: Any,
    window: Window,
    batch: int | None = None,
) -> Explanation:
    """Why ``key``'s ``window`` of ``stage`` has (not) fired as of the end of ``batch`` (default: the last).

    A stage reading one source is explained from that source's splits (:func:`explain_window`); any other
    stage from its upstreams' watermarks (:func:`explain_stage_window`), naming the one that holds it back. A window
    join's windows are explained as windows of its default trigger: the window's pairs are emitted with its pane.

    :raises LookupError: the log has no entries for ``batch`` (never ran, or pruned). :raises ValueError: ``stage``
        is an interval join or a process stage (no windows: :func:`floodmark.explain.rows.explain_time` explains
        what waits at an event time there).
    """
    spec = windows_of(stage)
    if spec is None:
        raise ValueError(
            f"stage {stage.name!r} has no windows to explain: explain what waits at an event time instead "
            "(floodmark.explain.rows: a join row's partners and cleanup, a process stage's timer)"
        )
    batch, applied = applied_watermark(controller, stage.name, batch)
    sources, graph, after = controller.graph_at(batch + 1)
    upstream = stage.upstream
    if len(upstream) == 1 and upstream[0] in sources:
        return explain_window(
            spec,
            key,
            window,
            sources[upstream[0]],
            processing_time=after.processing_time,
            applied_watermark=applied,
        )
    reports = upstream_reports(stage, sources, graph, after, window.max_timestamp)
    return explain_stage_window(
        spec,
        key,
        window,
        graph.watermarks[stage.name].input_watermark,
        reports,
        after.processing_time,
        applied_watermark=applied,
    )


def applied_watermark(controller: Controller, stage: str, batch: int | None) -> tuple[int, int]:
    """``batch`` (default: the last finished) and the input watermark ``stage`` ran with in it.

    :raises LookupError: the log has no entry for ``batch`` (never ran, or pruned)."""
    batch = last_batch(controller) if batch is None else batch
    ran = controller.logged(batch)
    if ran is None:
        raise LookupError(f"no control entry {batch} in {controller.log.directory}")
    return batch, ran.watermark_for(stage)


def upstream_reports(
    stage: WindowedStage | JoinStage | ProcessStage,
    sources: Mapping[str, SourceWatermarks],
    graph: StageGraph,
    after: ControlEntry,
    target: int,
) -> list[UpstreamReport]:
    """Each upstream of ``stage`` in the state ``after`` a batch (:meth:`Controller.graph_at` of the next entry),
    seen from the event time ``target`` (its gap is measured to it): a source's combined watermark and idleness, an
    upstream stage's output watermark, input watermark and lowest hold."""
    holds = BucketGauges(after.buckets)
    reports = []
    for name in stage.upstream:
        if name in sources:
            watermark, idle = sources[name].watermark, sources[name].idle
            reports.append(UpstreamReport(name, False, watermark, idle, _gap(target, watermark)))
        else:
            marks = graph.watermarks[name]
            watermark = marks.output_watermark
            reports.append(
                UpstreamReport(
                    name,
                    True,
                    watermark,
                    graph.idle[name],
                    _gap(target, watermark),
                    input_watermark=marks.input_watermark,
                    hold=holds.lowest(name, wire.HOLD),
                )
            )
    return reports


def _gap(max_timestamp: int, watermark: int) -> int:
    return min(MAX_TIMESTAMP, max(0, max_timestamp - watermark))
