"""Watermarks of a graph of sources and windowed stages, advanced once per micro-batch.

A stage's *input watermark* is the MIN over its upstreams (sources and stages,
idle ones excluded as for splits); its *output watermark* is
``MIN(input watermark, hold)``, the hold being the lowest output timestamp the
stage still owes (:class:`~floodmark.core.watermarks.stage.StageWatermark`).

On a micro-batch engine every stage runs once per batch, upstream first, and
panes travel downstream within the batch. The rule that keeps those panes on
time is to give each stage, for batch ``N+1``, what its upstreams were after
batch ``N``::

    OW_s(N)   = max(OW_s(N-1), min(IW_s(N), H_s(N) - 1))
    IW_s(N+1) = max(IW_s(N),   MIN over non-idle upstreams u of W_u(N))

where ``H_s(N)`` is the lowest hold among stage ``s``'s buckets after batch N
(``None``: nothing held), and ``W_u(N)`` is source ``u``'s watermark for batch
N+1 or upstream stage ``u``'s ``OW_u(N)``. Every pane an upstream stage emits
in batch N+1 is timestamped after ``OW_u(N)`` (Beam's hold rule one below the
hold, see ``StageWatermark`` and
:mod:`floodmark.core.assign`), so the downstream stage, which advances to
``IW_s(N+1) <= OW_u(N)`` before it adds them, takes them on time. The price is
one batch (one trigger) of event-time latency per stage: a window fires in
stage ``s`` one batch after its upstream's watermark passed it.

When every upstream of a stage is idle the stage is idle too (its downstream
stages leave it out of their MIN) and its input watermark is the highest of its
upstreams', never MIN_TIMESTAMP.

When a bounded input turns out to be exhausted before batch ``N+1`` runs (it reads
nothing new), the sources' watermarks become MAX for that batch already
(:meth:`StageGraph.end_sources`): ``IW_s(N+1)`` is recomputed for the stages that
read sources, with ``W_u = MAX`` for every source ``u``; stages that read stages
keep theirs, since their upstreams have not yet run at MAX. That is what
:meth:`StageGraph.advance` would have given after batch ``N`` had the sources been
MAX then, so the flush starts one batch earlier and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from floodmark.core.time import MAX_TIMESTAMP
from floodmark.core.watermarks.stage import StageWatermark


class StageGraph:
    """The stage watermarks of a pipeline; a pure function of the batches' sources and holds.

    :arg sources: source names.
    :arg upstreams: ``{stage: [upstream source or stage names]}``; every upstream must be a source or an
        earlier stage (no cycles).
    :raises ValueError: for an unknown upstream, a cycle, a name used twice or a stage without upstream.
    """

    def __init__(self, sources: Sequence[str], upstreams: Mapping[str, Sequence[str]]) -> None:
        names = [*sources, *upstreams]
        if len(set(names)) != len(names):
            raise ValueError(f"source and stage names must be unique, got {names}")
        self.sources = tuple(sources)
        self.upstreams = {stage: tuple(ups) for stage, ups in upstreams.items()}
        self.levels: dict[str, int] = {}
        for stage in self.upstreams:
            self._level(stage, ())
        self.order = sorted(self.upstreams, key=lambda s: (self.levels[s], list(self.upstreams).index(s)))
        """Stages, upstream first."""
        self.watermarks = {stage: StageWatermark(list(ups)) for stage, ups in self.upstreams.items()}
        self.idle = {stage: False for stage in self.upstreams}

    def _level(self, stage: str, path: tuple[str, ...]) -> int:
        if stage in self.levels:
            return self.levels[stage]
        if stage in path:
            raise ValueError(f"stages form a cycle: {' -> '.join([*path, stage])}")
        ups = self.upstreams[stage]
        if not ups:
            raise ValueError(f"stage {stage!r} has no upstream")
        levels = []
        for up in ups:
            if up in self.sources:
                levels.append(0)
            elif up in self.upstreams:
                levels.append(self._level(up, (*path, stage)))
            else:
                raise ValueError(f"stage {stage!r} reads {up!r}, which is neither a source nor a stage")
        self.levels[stage] = 1 + max(levels)
        return self.levels[stage]

    def sources_of(self, stage: str) -> list[str]:
        """The sources ``stage`` reads, directly or through its upstream stages (its input watermark is never
        ahead of the MIN of theirs), in :attr:`sources` order."""
        found: set[str] = set()
        todo = [stage]
        while todo:
            for upstream in self.upstreams[todo.pop()]:
                if upstream in self.sources:
                    found.add(upstream)
                else:
                    todo.append(upstream)
        return [source for source in self.sources if source in found]

    def downstream(self, name: str) -> list[str]:
        """The stages that read ``name`` (a source or a stage), in :attr:`order`."""
        return [stage for stage in self.order if name in self.upstreams[stage]]

    def input_watermarks(self) -> dict[str, int]:
        """Each stage's input watermark for the next batch."""
        return {stage: self.watermarks[stage].input_watermark for stage in self.order}

    def output_watermarks(self) -> dict[str, int]:
        """Each stage's output watermark after the last batch."""
        return {stage: self.watermarks[stage].output_watermark for stage in self.order}

    def advance(self, sources: Mapping[str, tuple[int, bool]], holds: Mapping[str, int | None]) -> dict[str, int]:
        """The batch that ran with :meth:`input_watermarks` is done; returns the next batch's.

        :arg sources: ``{source: (watermark for the next batch, idle)}``.
        :arg holds: ``{stage: lowest hold over its buckets after the batch, or None}`` (missing: None).
        """
        for stage in self.order:
            self.watermarks[stage].update_output(holds.get(stage))
        for stage in self.order:
            marks = self.watermarks[stage]
            for up in self.upstreams[stage]:
                if up in self.sources:
                    watermark, idle = sources[up]
                else:
                    watermark, idle = self.watermarks[up].output_watermark, self.idle[up]
                marks.update_upstream(up, watermark, idle)
            self.idle[stage] = all(idle for _, idle in marks.upstream.values())
        return self.input_watermarks()

    def end_sources(self) -> dict[str, int]:
        """The input ended before the next batch (see the module docstring): every source's watermark is
        ``MAX_TIMESTAMP`` and none is idle for it; returns the next batch's input watermarks."""
        for stage in self.order:
            marks = self.watermarks[stage]
            read = [up for up in self.upstreams[stage] if up in self.sources]
            for source in read:
                marks.update_upstream(source, MAX_TIMESTAMP, False)
            if read:
                self.idle[stage] = all(idle for _, idle in marks.upstream.values())
        return self.input_watermarks()

    def snapshot(self) -> dict[str, Any]:
        return {stage: {**self.watermarks[stage].snapshot(), "idle": self.idle[stage]} for stage in self.order}

    def restore(self, state: Mapping[str, Any]) -> None:
        for stage, saved in state.items():
            self.watermarks[stage].restore(saved)
            self.idle[stage] = bool(saved.get("idle", False))
