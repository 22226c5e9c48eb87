"""Explaining a run from its files: why has this window not fired (``floodmark explain``)?

A floodmark query leaves everything needed on disk: the control log in its checkpoint (each source's
coordinator, each stage's watermarks and holds after every batch), the job's definition (every query writes it
into its checkpoint when it starts: :mod:`floodmark.driver.definition`) and the pane output. ``demo`` and
``replay`` outputs also have ``pipeline.json``; the games demo's graph is known. :func:`explain_run` asks
:func:`floodmark.explain.stage.explain_stage` about one key and window of one stage, as the run stood after a
batch, and says whether (and in which batch) the pane reached the output. A job whose own code cannot be
rebuilt from its checkpoint (a lambda) is explained from Python: ``Pipeline.explain(checkpoint, ...)``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from floodmark.apps.config import PipelineConfig
from floodmark.apps.games import DEMO_MARKER as GAMES_MARKER
from floodmark.apps.games import game_source_settings, game_stages
from floodmark.apps.outputs import read_folder
from floodmark.core.pipeline import JoinStage, ProcessStage, WindowedStage, stage_named
from floodmark.core.spec import WindowSpec
from floodmark.core.timestamps import TimestampCombiner
from floodmark.core.windows import Cumulate, Sessions, Sliding, Tumbling, Window
from floodmark.driver import checkpoint_layout
from floodmark.driver.checkpoint_files import LocalFiles, has_scheme
from floodmark.driver.checkpoint_layout import floodmark_path
from floodmark.driver.control_log import ControlLog
from floodmark.driver.controller import AGGREGATION_SOURCE, AGGREGATION_STAGE, KEPT_ENTRIES, Controller, SourceSettings
from floodmark.driver.definition import JobDefinition, definition_path
from floodmark.driver.definition_changes import NEW_CHECKPOINT, Change, changes_from
from floodmark.explain.rows import TimeExplanation, explain_time
from floodmark.explain.stage import explain_stage, windows_of
from floodmark.explain.window import Explanation


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


@dataclass(frozen=True)
class RunDefinition:
    """What ``floodmark explain`` needs of a run: its graph (how each source's watermark is made, each stage's
    definition) and where its checkpoint and each stage's outputs are."""

    sources: dict[str, SourceSettings]
    stages: dict[str, WindowedStage | JoinStage | ProcessStage]
    checkpoint: Path
    panes: dict[str, Path | None]
    """Each stage's pane output folder (``batch_id=N`` folders under it); None: not files (a table, Kafka)."""

    @classmethod
    def of(cls, run: Path) -> RunDefinition:
        """The definition of the run in ``run``: a query's checkpoint (the job definition it was started with,
        :mod:`floodmark.driver.definition`: any job, defined in Python or not), a ``demo``/``replay`` output
        (``pipeline.json``: one aggregation) or one run of the games demo (``floodmark demo games``:
        ``<output>/<END_OF_WINDOW|EARLIEST>``).

        :raises FileNotFoundError: ``run`` is none of these.
        :raises NotDescribable: the job uses code of its own that cannot be rebuilt here (a lambda).
        """
        config_path = run / "pipeline.json"
        if config_path.exists():
            pipeline = PipelineConfig.from_file(config_path)
            stage = WindowedStage(AGGREGATION_STAGE, AGGREGATION_SOURCE, pipeline.window_spec(), pipeline.key_by)
            sources = {AGGREGATION_SOURCE: SourceSettings(pipeline.strategy())}
            return cls(sources, {stage.name: stage}, run / "checkpoint", {stage.name: run / "panes"})
        combiners = {c.name: c for c in TimestampCombiner}
        if (run.parent / GAMES_MARKER).exists() and run.name in combiners:
            stages = {stage.name: stage for stage in game_stages(combiners[run.name])}
            return cls(game_source_settings(), stages, run / "checkpoint", {n: run / n / "panes" for n in stages})
        if Path(definition_path(str(run))).exists():
            job = JobDefinition.read(LocalFiles(), str(run), functions_optional=True)
            sources = {name: source.settings for name, source in job.sources.items()}
            panes = {name: _local(job.outputs.get(name, {}).get("panes")) for name in job.stages}
            return cls(sources, job.stages, run, panes)
        raise FileNotFoundError(
            f"{run} is not a query's checkpoint ({definition_path(str(run))} not found) nor a run of floodmark "
            "demo or replay (no pipeline.json): give the checkpoint of your query, the output directory of floodmark "
            "demo or replay, or one run of floodmark demo games (its END_OF_WINDOW or EARLIEST directory)"
        )

    def stage(self, name: str | None) -> WindowedStage | JoinStage:
        """Stage ``name`` (default: the only one), one with windows: a window stage or a window join.

        :raises ValueError: unknown, needed and not given, or an interval join or a process stage (no windows to
            explain)."""
        stage = self.any_stage(name)
        if windows_of(stage) is None:
            kind = "an interval join" if isinstance(stage, JoinStage) else "a process stage"
            raise ValueError(
                f"stage {stage.name!r} is {kind} and has no windows to explain: give --time (and a join's --side) "
                "to explain what waits at an event time there"
            )
        assert not isinstance(stage, ProcessStage)
        return stage

    def any_stage(self, name: str | None) -> WindowedStage | JoinStage | ProcessStage:
        """Stage ``name`` of any kind (default: the only one). :raises ValueError: unknown, or needed and not given."""
        return self.stages[stage_named(list(self.stages), name, "the run", "with --stage")]

    def controller(self) -> Controller:
        """A controller over the run's control log (reads only)."""
        return Controller(
            ControlLog(floodmark_path(self.checkpoint, checkpoint_layout.CONTROL)),
            self.sources,
            {name: list(s.upstream) for name, s in self.stages.items()},
        )


def _local(path: str | None) -> Path | None:
    """A file output's folder as a local path (``file://`` URIs included); None for other file systems."""
    if path is None:
        return None
    if path.startswith("file:"):
        return Path(path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:"))
    return None if has_scheme(path) else Path(path)


def window_at(spec: WindowSpec, start: int, end: int | None = None) -> Window:
    """The window of ``spec`` starting at ``start`` (ms) and, for cumulate windows (which share starts), ending at
    ``end`` (exclusive); for sessions, the shortest: one record's gap. Other windows need no ``end``; one given
    must be theirs."""
    assigner = spec.window
    if isinstance(assigner, Tumbling) and (start - assigner.offset) % assigner.size:
        raise ValueError(f"{start} is not the start of a {assigner.size} ms tumbling window")
    if isinstance(assigner, Cumulate):
        if (start - assigner.offset) % assigner.max_size:
            raise ValueError(f"{start} is not the start of a {assigner.max_size} ms cumulate window")
        if end is None or not 0 < end - start <= assigner.max_size or (end - start) % assigner.step:
            raise ValueError(
                f"cumulate windows share their start: give the window's end too, {start} + k * {assigner.step} ms "
                f"for k = 1..{assigner.max_size // assigner.step}"
            )
        return Window(start, end)
    if isinstance(assigner, Tumbling | Sliding):
        window = Window(start, start + assigner.size)
    elif isinstance(assigner, Sessions):
        window = Window(start, start + assigner.gap)
    else:
        raise ValueError(f"explain needs windows with a start; {type(assigner).__name__} windows have none")
    if end is not None and end != window.end:
        raise ValueError(f"the {type(assigner).__name__.lower()} window starting at {start} ends at {window.end}")
    return window


def explain_run(
    run: str | Path,
    key: tuple[Any, ...] | Any,
    window_start: int,
    batch: int | None = None,
    stage: str | None = None,
    window_end: int | None = None,
) -> RunExplanation:
    """Explain ``key``'s window of ``stage`` (default: the only stage) starting at ``window_start`` (and ending at
    ``window_end``: needed for cumulate windows, which share starts; see :func:`window_at`) as the run stood at the
    end of ``batch`` (default: the last): :func:`floodmark.explain.stage.explain_stage`, with the stage's panes of
    batches up to ``batch`` for that key and window.

    :arg key: one value per key column of the stage (a tuple, or the value itself for one column); ``()`` or
        None for a stage without key columns.
    :raises FileNotFoundError: ``run`` is not a run's output directory.
    :raises LookupError: the run has no batch ``batch`` (the message names the batches it has).
    :raises ValueError: ``key`` does not fit the stage's key columns, ``window_start`` is not a window's start,
        or ``stage`` is not the run's.
    """
    run = Path(run)
    definition = RunDefinition.of(run)
    chosen = definition.stage(stage)
    keys = key if isinstance(key, tuple) else (() if key is None else (key,))
    folder = definition.panes[chosen.name]
    panes = read_folder(folder) if folder is not None else pd.DataFrame()
    key_columns = chosen.key_columns
    if len(keys) != len(key_columns):
        if not key_columns:
            raise ValueError(f"stage {chosen.name!r} has no key columns: leave --key out")
        example = "" if panes.empty else f" (e.g. {','.join(str(panes[c].iloc[0]) for c in key_columns)})"
        raise ValueError(
            f"key {','.join(map(str, keys))} has {len(keys)} value(s) but the run is keyed by "
            f"{len(key_columns)} column(s), {', '.join(key_columns)}: give one value per column, "
            f"comma-separated in that order{example}"
        )
    spec = windows_of(chosen)
    assert spec is not None  # definition.stage gave a stage with windows
    window = window_at(spec, window_start, window_end)
    controller = definition.controller()
    batch = _batch_to_explain(run, controller.log.seqs(), batch)
    key_value = None if not keys else keys[0] if len(keys) == 1 else keys
    explanation = explain_stage(controller, chosen, key_value, window, batch)
    emitted: list[dict[str, Any]] = []
    if not panes.empty:
        mask = (panes["window_start"] == window.start) & (panes["batch_id"] <= batch)
        if not spec.window.is_merging:
            mask &= panes["window_end"] == window.end
        for column, value in zip(key_columns, keys, strict=True):
            mask &= panes[column].astype(str) == str(value)
        # A window join's rows are its pairs: their values are the two rows' columns.
        values = (
            chosen.result_names
            if isinstance(chosen, WindowedStage)
            else [c for c in panes.columns if c.startswith(("left_", "right_"))]
        )
        for row in panes[mask].sort_values("batch_id").to_dict("records"):
            row.update({f"value:{name}": row[name] for name in values})
            emitted.append(row)
    return RunExplanation(explanation, batch, emitted)


def explain_time_run(
    run: str | Path, event_time: int, side: str | None = None, batch: int | None = None, stage: str | None = None
) -> TimeRunExplanation:
    """Explain what waits at ``event_time`` in ``stage`` (an interval join: a ``side`` row; a process stage: an
    event-time timer) as the run stood at the end of ``batch`` (default: the last):
    :func:`floodmark.explain.rows.explain_time`.

    :raises FileNotFoundError: ``run`` is not a run's output directory. :raises LookupError: the run has no batch
        ``batch``. :raises ValueError: ``stage`` is not the run's, has windows, or ``side`` does not fit it.
    """
    run = Path(run)
    definition = RunDefinition.of(run)
    chosen = definition.any_stage(stage)
    controller = definition.controller()
    batch = _batch_to_explain(run, controller.log.seqs(), batch)
    return TimeRunExplanation(explain_time(controller, chosen, event_time, side, batch), batch)


@dataclass(frozen=True)
class TimeRunExplanation:
    """:func:`~floodmark.explain.rows.explain_time`'s answer for a run, as of the end of ``batch``."""

    explanation: TimeExplanation
    batch: int

    def text(self) -> str:
        return f"as of the end of batch {self.batch}:\n{self.explanation.text()}"


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


@dataclass(frozen=True)
class ChangesExplanation:
    """What starting a changed job on a checkpoint would do: each change, kept or refused."""

    checkpoint: Path
    changes: list[Change]

    @property
    def refused(self) -> list[Change]:
        return [change for change in self.changes if not change.kept]

    def text(self) -> str:
        if not self.changes:
            return f"no change: the job defined so starts on {self.checkpoint} as it is"
        lines = [change.line() for change in self.changes]
        if self.refused:
            lines.append(f"refused: {len(self.refused)} of {len(self.changes)} changes. To go on: {NEW_CHECKPOINT}")
        else:
            lines.append(f"every change keeps the state: the job starts on {self.checkpoint} with them")
        return "\n".join(lines)


def explain_changes(checkpoint: str | Path, definition_file: str | Path) -> ChangesExplanation:
    """What starting the job ``definition_file`` describes on ``checkpoint`` would change
    (:mod:`floodmark.driver.definition_changes`), without starting it. ``definition_file`` is a job definition in
    the form a checkpoint keeps it (``<checkpoint>/floodmark/definition.json``, in JSON or TOML): copy it, edit it,
    ask.

    :raises FileNotFoundError: ``checkpoint`` holds no job definition. :raises ValueError: the file is not a job
        definition.
    """
    checkpoint, path = Path(checkpoint), Path(definition_file)
    if not Path(definition_path(str(checkpoint))).exists():
        raise FileNotFoundError(f"{checkpoint} holds no job definition ({definition_path(str(checkpoint))})")
    try:
        now = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not a job definition in JSON or TOML: {error}") from None
    if not isinstance(now, dict) or "sources" not in now or "stages" not in now:
        raise ValueError(f"{path} is not a job definition: it has no sources and stages (see {checkpoint}'s)")
    return ChangesExplanation(checkpoint, changes_from(LocalFiles(), str(checkpoint), now))
