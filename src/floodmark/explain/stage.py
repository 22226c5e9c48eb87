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

from typing import Any

from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage
from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.windows import Window
from floodmark.driver.controller import Controller
from floodmark.explain.window import Explanation, UpstreamReport, explain_stage_window, explain_window
from floodmark.protocol import wire
from floodmark.protocol.control import BucketGauges


def last_batch(controller: Controller) -> int:
    """The last batch the control log shows finished (its entry and the next one exist).

    :raises LookupError: no batch has finished yet.
    """
    seqs = controller.log.seqs()
    if len(seqs) < 2:
        raise LookupError(f"no batch has finished yet ({controller.log.directory}): there is nothing to explain")
    return seqs[-1] - 1


def explain_stage(
    controller: Controller,
    stage: WindowedStage | JoinStage | ProcessStage,
    key: Any,
    window: Window,
    batch: int | None = None,
) -> Explanation:
    """Why ``key``'s ``window`` of ``stage`` has (not) fired as of the end of ``batch`` (default: the last).

    A stage reading one source is explained from that source's splits (:func:`explain_window`); any other
    stage from its upstreams' watermarks (:func:`explain_stage_window`), naming the one that holds it back.

    :raises LookupError: the log has no entries for ``batch`` (never ran, or pruned). :raises ValueError: ``stage``
        is a join or a process stage (no windows: its reports and reconciliation say what it buffered and emitted).
    """
    if not isinstance(stage, WindowedStage):
        kind = "a join" if isinstance(stage, JoinStage) else "a process stage"
        raise ValueError(
            f"stage {stage.name!r} is {kind} and has no windows to explain: its reports (open windows: rows buffered"
            " or keys kept) and query.stage_reconciliation say what it emitted"
        )
    batch = last_batch(controller) if batch is None else batch
    ran = controller.logged(batch)
    if ran is None:
        raise LookupError(f"no control entry {batch} in {controller.log.directory}")
    applied = ran.watermark_for(stage.name)
    sources, graph, after = controller.graph_at(batch + 1)
    upstream = stage.upstream
    if len(upstream) == 1 and upstream[0] in sources:
        return explain_window(
            stage.spec,
            key,
            window,
            sources[upstream[0]],
            processing_time=after.processing_time,
            applied_watermark=applied,
        )
    holds = BucketGauges(after.buckets)
    max_ts = window.max_timestamp
    reports = []
    for name in upstream:
        if name in sources:
            watermark, idle = sources[name].watermark, sources[name].idle
            reports.append(UpstreamReport(name, False, watermark, idle, _gap(max_ts, watermark)))
        else:
            marks = graph.watermarks[name]
            watermark = marks.output_watermark
            reports.append(
                UpstreamReport(
                    name,
                    True,
                    watermark,
                    graph.idle[name],
                    _gap(max_ts, watermark),
                    input_watermark=marks.input_watermark,
                    hold=holds.lowest(name, wire.HOLD),
                )
            )
    return explain_stage_window(
        stage.spec,
        key,
        window,
        graph.watermarks[stage.name].input_watermark,
        reports,
        after.processing_time,
        applied_watermark=applied,
    )


def _gap(max_timestamp: int, watermark: int) -> int:
    return min(MAX_TIMESTAMP, max(0, max_timestamp - watermark))
