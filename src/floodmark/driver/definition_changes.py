"""Settings changed on a running job: which differences from the checkpoint's definition keep its state.

A query started on an existing checkpoint compares its definition (:class:`~floodmark.driver.definition.
JobDefinition`, as data) with the one the checkpoint holds. Each difference is a :class:`Change`, kept or refused:

Kept (the state follows; the new setting applies from the restart's first batch on):

* a source's **watermark strategy** (bound, generator kind, idleness timeout, alignment group and drift, timestamp
  assigner), periodic interval, percentile, known splits and future skew: each split keeps the highest timestamp its
  generator has seen and its watermark; the new settings apply to them at once, and no split's watermark goes back
  (a wider bound holds it where it was until records pass it: :mod:`floodmark.core.watermarks.generator`);
* a stage's **allowed lateness**, raised or lowered (window stages and joins): windows and rows still held follow the
  new horizon; what the old one already dropped stays dropped, and a record for it goes to the late output;
* a window stage's **trigger** (early and late firings) where both triggers have the columnar form (on the JVM host
  the new spec then has a built-in form too: its window and aggregate had one already): the window's bookkeeping
  (records since its last pane, the oldest pending record's time, whether the watermark fired it) is the trigger's
  whole state, and the new trigger reads it. Partial
  aggregates that waited apart for the watermark (:attr:`~floodmark.core.spec.WindowSpec.defers_partials`) are
  merged into their windows at the restore when early firings are added;
* a stage's **outputs**: panes, late records and dead letters go to the new places from the restart on.

Refused, by name, with what to do (the state was made by the old definition and cannot follow): a source's event
time, split or time zone; a stage's window, keys, derived columns, upstreams, aggregate, accumulation, timestamp
combiner; a join's bounds, kind, output time or inputs; a process stage's function or output columns; a trigger
change outside the rule above; a stage or source added or removed (Spark's checkpoint holds one state per stateful
operator of the plan it started with).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floodmark.driver.checkpoint_files import CheckpointFiles
from floodmark.driver.definition import JobDefinition, NotDescribable, definition_path, spec_from

_LOG = logging.getLogger(__name__)

NEW_CHECKPOINT = "start the changed query from a new checkpoint (and new outputs), or keep this setting as it was"

_SOURCE_KEPT = {
    "watermarks": "each split keeps its highest timestamp and its watermark; the new strategy applies from the "
    "restart (no split's watermark goes back)",
    "periodic_interval": "watermarks are emitted at the new interval from the restart",
    "percentile": "the splits' watermarks are combined by the new percentile from the restart",
    "known_splits": "the new splits hold the watermark back from the restart",
    "max_future_skew": "records are judged against the new skew from the restart",
}
_SOURCE_REFUSED = {
    "event_time": "the state holds records placed by the old event time",
    "split": "each split's watermark is kept under its old split value",
    "time_zone": "the state holds event times read in the old time zone",
}
_LATENESS_KEPT = (
    "what is still held follows the new horizon; what the old one already dropped stays dropped (a record for it goes "
    "to the late output)"
)
_OUTPUTS_KEPT = "written to the new places from the restart's first batch on"


@dataclass(frozen=True)
class Change:
    """One difference between the definition a checkpoint holds and the one a query starts with.

    :ivar owner: what changed: ``"source 'clicks'"``, ``"stage 'fares'"``, ``"the job"``.
    :ivar setting: the setting (``"allowed_lateness"``, ``"watermarks"``, ``"stage added"``...).
    :ivar before: the checkpoint's value, as the definition writes it (None: absent).
    :ivar after: the new value (None: absent).
    :ivar how: kept: how the state follows; refused: why it cannot.
    :ivar kept: the state is kept through the change.
    """

    owner: str
    setting: str
    before: Any
    after: Any
    how: str
    kept: bool

    def line(self) -> str:
        """One line: ``stage 'w': allowed_lateness 0 -> 60000: kept (...)`` or ``...: refused (...)``."""
        verdict = "kept" if self.kept else "refused"
        return f"{self.owner}: {self.setting} {self.before!r} -> {self.after!r}: {verdict} ({self.how})"


def compare(earlier: Mapping[str, Any], now: Mapping[str, Any]) -> list[Change]:
    """Every difference of ``now`` from ``earlier`` (two :meth:`~floodmark.driver.definition.JobDefinition.to_dict`
    forms, ``earlier`` the checkpoint's), kept or refused by the module docstring's rules."""
    found: list[Change] = []
    for kind in ("source", "stage"):
        before, after = earlier.get(f"{kind}s", {}), now.get(f"{kind}s", {})
        for name in sorted(set(before) ^ set(after)):
            setting = f"{kind} added" if name in after else f"{kind} removed"
            how = "Spark's checkpoint holds one state per stateful operator of the plan it started with"
            found.append(Change(f"{kind} {name!r}", setting, before.get(name), after.get(name), how, False))
        for name in [n for n in after if n in before]:
            old, new = before[name], after[name]
            if kind == "source":
                found += _source_changes(name, old, new)
            else:
                found += _stage_changes(name, old, new)
    outputs_before, outputs_after = earlier.get("outputs", {}), now.get("outputs", {})
    for stage in sorted(set(outputs_before) | set(outputs_after)):
        old, new = outputs_before.get(stage), outputs_after.get(stage)
        if old != new and stage in now.get("stages", {}) and stage in earlier.get("stages", {}):
            found.append(Change(f"stage {stage!r}", "outputs", old, new, _OUTPUTS_KEPT, True))
    return found


def changes_from(files: CheckpointFiles, checkpoint: str, now: Mapping[str, Any]) -> list[Change]:
    """What starting the job ``now`` (a :meth:`~floodmark.driver.definition.JobDefinition.to_dict` form) on
    ``checkpoint`` would change (none: a new checkpoint, or the same job)."""
    text = files.read_text(definition_path(checkpoint))
    return [] if text is None else compare(json.loads(text), now)


def check(files: CheckpointFiles, checkpoint: str, definition: JobDefinition) -> list[Change]:
    """The changes ``definition`` makes to the job at ``checkpoint``, each logged in one line, when the state can
    follow all of them.

    :raises ValueError: naming each refused change, and what to do."""
    found = changes_from(files, checkpoint, definition.to_dict())
    refused = [change for change in found if not change.kept]
    if refused:
        raise ValueError(
            f"the checkpoint {checkpoint} holds the state of a query defined otherwise, and that state cannot follow "
            f"{'; '.join(change.line() for change in refused)}. To go on: {NEW_CHECKPOINT}"
        )
    for change in found:
        _LOG.info("floodmark: %s", change.line())
    return found


def _source_changes(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    found = []
    for setting in sorted(set(old) | set(new)):
        before, after = old.get(setting), new.get(setting)
        if _same(before, after):
            continue
        if setting in _SOURCE_KEPT:
            found.append(Change(f"source {name!r}", setting, before, after, _SOURCE_KEPT[setting], True))
        else:
            why = _SOURCE_REFUSED.get(setting, "the checkpoint's state was made with the old setting")
            found.append(Change(f"source {name!r}", setting, before, after, why, False))
    return found


def _stage_changes(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    owner = f"stage {name!r}"
    if old.get("kind") != new.get("kind"):
        why = "its state is of the old kind of stage"
        return [Change(owner, "kind", old.get("kind", "window"), new.get("kind", "window"), why, False)]
    if "spec" in old:  # a window stage: its spec's fields one by one
        old = {**{k: v for k, v in old.items() if k != "spec"}, **old["spec"]}
        new = {**{k: v for k, v in new.items() if k != "spec"}, **new.get("spec", {})}
    found = []
    for setting in sorted(set(old) | set(new)):
        before, after = old.get(setting), new.get(setting)
        if _same(before, after):
            continue
        if setting == "allowed_lateness":
            found.append(Change(owner, setting, before, after, _LATENESS_KEPT, True))
        elif setting == "trigger":
            why_not = _trigger_refused(old, new)
            how = why_not or "the window's bookkeeping (records since its last pane, its oldest pending record, "
            how += "" if why_not else "whether the watermark fired it) is read by the new trigger from the restart"
            found.append(Change(owner, setting, before, after, how, why_not is None))
        else:
            found.append(Change(owner, setting, before, after, "the stage's state was made with the old one", False))
    return found


def _trigger_refused(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a window stage's state cannot follow its trigger from ``old`` to ``new`` (None: it can)."""
    try:
        before, after = spec_from(old), spec_from({**old, "trigger": new["trigger"]})
    except (NotDescribable, ValueError) as error:
        return f"the trigger cannot be rebuilt here: {error}"
    if not (before.is_columnar and after.is_columnar):
        return "a trigger without the columnar form keeps state of its own, which another trigger cannot read"
    return None


def _same(before: Any, after: Any) -> bool:
    """Equal, or both your own code (a description's text tells nothing: a repr may hold an address)."""
    unnamed = [isinstance(each, Mapping) and each.get("kind") == "unnamed" for each in (before, after)]
    return before == after or all(unnamed)
