"""The watermark generator protocol (Flink's ``WatermarkGenerator``), in Python.

A generator sees the timestamps of one split and decides its watermark. It is
driven two ways:

* ``on_event(event, timestamp, output)`` for every record (punctuated
  generators emit from here);
* ``on_periodic_emit(output)`` every auto-watermark interval of processing time
  (Flink's default: 200 ms), whether or not records arrived.

Micro-batch mode (how the Spark runtime drives generators): a batch's records of
one split are not replayed one by one. The generator receives one
:class:`~floodmark.core.watermarks.batch_stats.SplitBatchStats` through
``on_batch(stats, output)`` per micro-batch, ``count == 0`` when the batch had no
record of its split. The default ``on_batch`` calls
``on_event(None, stats.max_timestamp, output)`` once when the batch had records
for the split: exactly what a generator that only tracks the maximum timestamp
(bounded out-of-orderness, ascending, idle-advancing, legacy) would have computed
from the records themselves. A generator that needs more (the minimum, the
count, quantiles, the records' payload) overrides ``on_batch``. Note that
``event`` is ``None`` in that default call.

State: ``snapshot()`` returns a plain, JSON-serialisable ``dict`` and
``restore(state)`` puts it back. The default copies the instance's public and
private attributes, which is right for generators whose attributes are ints,
floats, strings, lists and dicts; override both for anything else.

Settings changed on a running job: the built-in generators snapshot what they have *seen*, never their settings
(bound, wait, interval), so a job restarted with another bound keeps each split's highest timestamp and applies the
new bound to it at once. Their snapshots share ``max_timestamp`` (the highest timestamp seen; None before any
record): a split whose strategy changed kind (bounded to idle-advancing, say) continues from it as if that record
had just arrived. The split's watermark never goes back (``WatermarkOutput``): after a wider bound it stays where it
was until the records pass it. Your own generator restores its own snapshot (the default keeps its attributes,
settings included: override ``snapshot``/``restore`` to let a restart change them).

Introspection (for ``floodmark explain``; both optional): :meth:`~WatermarkGenerator.describe`
says what the generator is in words, :meth:`~WatermarkGenerator.view` what it knows
(:class:`~floodmark.core.watermarks.generator_view.GeneratorView`: bound, highest
timestamp, how far its watermark trails it, idleness; the default knows only the
description). What a generator does *without* records is never described: explain
runs a copy of the coordinator forward (:mod:`floodmark.core.watermarks.projection`).
"""

from __future__ import annotations

import copy
from typing import Any

from floodmark.core.time import MIN_TIMESTAMP
from floodmark.core.watermarks.batch_stats import SplitBatchStats
from floodmark.core.watermarks.generator_view import GeneratorView
from floodmark.core.watermarks.output import WatermarkOutput


class WatermarkGenerator:
    """Base class of every watermark generator, built-in and user-defined.

    Subclasses override :meth:`on_event` and/or :meth:`on_periodic_emit`.
    Both default to doing nothing, so a generator that only emits periodically
    need not define ``on_event`` and vice versa.
    """

    def on_event(self, event: Any, timestamp: int, output: WatermarkOutput) -> None:
        """Called for every record of the split, with its timestamp in ms."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every auto-watermark interval of processing time."""

    def on_batch(self, stats: SplitBatchStats, output: WatermarkOutput) -> None:
        """Called once per micro-batch with the split's batch statistics.

        Default: one ``on_event(None, stats.max_timestamp, output)`` when the
        batch had records for this split, nothing otherwise.
        """
        if stats.count > 0:
            self.on_event(None, stats.max_timestamp, output)

    # ---------------------------------------------------------------- introspection
    def describe(self) -> str:
        """What this generator is, in words (kind and parameters)."""
        return f"generator {type(self).__name__}"

    def view(self) -> GeneratorView:
        """What it knows, for explain (default: only :meth:`describe`; the rest not known)."""
        return GeneratorView(self.describe())

    def snapshot(self) -> dict[str, Any]:
        """The generator's state as a plain ``dict`` (see the module docstring)."""
        return copy.deepcopy(vars(self))

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the generator's state with ``state`` from :meth:`snapshot`."""
        vars(self).update(copy.deepcopy(state))


def highest_seen(state: dict[str, Any], sentinel_above_bound: int, field: str = "max_timestamp") -> int | None:
    """The highest timestamp a built-in generator's snapshot ``state`` records (None: no record yet).

    A snapshot written before generators kept their settings out holds every attribute, the bound included, and
    stands for "no record" by a sentinel: ``MIN_TIMESTAMP + bound + sentinel_above_bound`` in ``field``.
    """
    if "bound" not in state:
        value = state.get("max_timestamp")
        return None if value is None else int(value)
    value = int(state[field])
    return None if value == MIN_TIMESTAMP + int(state["bound"]) + sentinel_above_bound else value
