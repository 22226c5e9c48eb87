"""The clickstream job's producer, with a split that goes quiet: pure Python/numpy, no Spark.

Records are ``(ts, channel, id, behavior, split)``: ``ts`` is the event time in ms since the epoch,
``channel`` one of ``a..d``, ``behavior`` one of :data:`BEHAVIORS`, ``split`` the source split (a Kafka
partition) that produced the record.

Time model. The run is ``config.ticks`` ticks; tick ``t`` happens at the *simulated* processing time
:func:`tick_processing_time` ``= start_ms + t * tick_ms``. At tick ``t`` every producing split emits

- ``records_per_tick_per_split`` regular records with
  ``ts = ptime(t) - source_lateness_ms - U`` where ``U`` is uniform on the integers ``[0, jitter_ms]``
  (both ends inclusive): event time trails processing time by the lateness and arrives out of order;
- at ``t == late_burst_tick`` its share of ``late_burst_records`` burst records with
  ``ts = ptime(t) - source_lateness_ms - late_burst_age_ms - U`` (pick the age larger than the watermark
  bound plus the allowed lateness of the job under test so that they are dropped as late);
- its share of ``bad_records_per_tick`` records whose ``ts`` is null (for the dead-letter output).

A split is *producing* at tick ``t`` unless it is ``idle_split`` and ``t >= idle_from_tick``: from that tick
on the idle split emits nothing at all, forever (a source gone quiet). Burst and bad records of a tick are spread over
the producing splits as evenly as possible (the remainder rotates with the tick).

Determinism. The records of ``(split, tick)`` come from a numpy Generator seeded with
``(seed, split, tick)`` only: the same config, split and tick always give the same frame, in any call order
and in any process. ``id`` is unique over the whole run: ``(tick * splits + split) * slot + index`` with
``slot`` the most records one split can emit in one tick (:attr:`ClickstreamConfig.id_slot`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

CHANNELS: tuple[str, ...] = ("a", "b", "c", "d")
BEHAVIORS: tuple[str, ...] = ("INSTALL", "OPEN", "BROWSE", "CLICK", "PURCHASE", "CLOSE", "UNINSTALL")
COLUMNS: tuple[str, ...] = ("ts", "channel", "id", "behavior", "split")

#: 2026-01-01T00:00:00Z in ms since the epoch: the default simulated processing time of tick 0.
DEFAULT_START_MS = 1_767_225_600_000
#: Wall-clock pacing of the demo (ticks made available per real second): with the demo's 5 s ticks this is a
#: 20x acceleration, so the demo's 216 ticks (18 simulated minutes) take about 54 wall seconds.
DEMO_TICKS_PER_SECOND = 4.0

_CHANNEL_VALUES = np.array(CHANNELS, dtype=object)
_BEHAVIOR_VALUES = np.array(BEHAVIORS, dtype=object)
_MAX_ID = 2**62


def _check_int(name: str, value: Any, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"clickstream config: {name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"clickstream config: {name} must be >= {minimum}, got {value}")


@dataclass(frozen=True)
class ClickstreamConfig:
    """What the simulator produces. All times are in ms; all counts are records. Validated on construction.

    ``seed``: determines every record. ``splits``: number of source splits, ``0..splits-1``.
    ``records_per_tick_per_split``: regular records each producing split emits per tick (the rate).
    ``tick_ms``: simulated processing time between ticks. ``ticks``: length of the run (bounded input).
    ``start_ms``: simulated processing time of tick 0. ``source_lateness_ms``: how far event time trails
    processing time (120 s in the clickstream job). ``jitter_ms``: out-of-order spread below that.
    ``idle_split``/``idle_from_tick``: the split that stops producing from that tick on (both or neither).
    ``late_burst_tick``/``late_burst_records``/``late_burst_age_ms``: one burst of very late records
    (tick and records both or neither). ``bad_records_per_tick``: records with a null ``ts`` per tick,
    over all producing splits.
    """

    seed: int
    splits: int = 4
    records_per_tick_per_split: int = 100
    tick_ms: int = 5_000
    ticks: int = 120
    start_ms: int = DEFAULT_START_MS
    source_lateness_ms: int = 120_000
    jitter_ms: int = 30_000
    idle_split: int | None = None
    idle_from_tick: int | None = None
    late_burst_tick: int | None = None
    late_burst_records: int = 0
    late_burst_age_ms: int = 300_000
    bad_records_per_tick: int = 0

    def __post_init__(self) -> None:
        _check_int("seed", self.seed, 0)
        _check_int("splits", self.splits, 1)
        _check_int("records_per_tick_per_split", self.records_per_tick_per_split, 0)
        _check_int("tick_ms", self.tick_ms, 1)
        _check_int("ticks", self.ticks, 1)
        _check_int("start_ms", self.start_ms)
        _check_int("source_lateness_ms", self.source_lateness_ms, 0)
        _check_int("jitter_ms", self.jitter_ms, 0)
        _check_int("late_burst_records", self.late_burst_records, 0)
        _check_int("late_burst_age_ms", self.late_burst_age_ms, 0)
        _check_int("bad_records_per_tick", self.bad_records_per_tick, 0)
        if (self.idle_split is None) != (self.idle_from_tick is None):
            raise ValueError("clickstream config: idle_split and idle_from_tick must be given together (or neither)")
        if self.idle_split is not None:
            _check_int("idle_split", self.idle_split, 0)
            _check_int("idle_from_tick", self.idle_from_tick, 0)
            if self.idle_split >= self.splits:
                raise ValueError(
                    f"clickstream config: idle_split must be a split in 0..{self.splits - 1}, got {self.idle_split}"
                )
        if self.late_burst_tick is None:
            if self.late_burst_records:
                raise ValueError("clickstream config: late_burst_records > 0 needs late_burst_tick")
        else:
            _check_int("late_burst_tick", self.late_burst_tick, 0)
            if self.late_burst_tick >= self.ticks:
                raise ValueError(
                    f"clickstream config: late_burst_tick must be a tick in 0..{self.ticks - 1}, "
                    f"got {self.late_burst_tick}"
                )
            if self.late_burst_records == 0:
                raise ValueError("clickstream config: late_burst_tick is set but late_burst_records is 0")
            if not self.producing_splits(self.late_burst_tick):
                raise ValueError(
                    f"clickstream config: no split produces at late_burst_tick {self.late_burst_tick} "
                    "(the only split is idle by then)"
                )
        if self.ticks * self.splits * self.id_slot >= _MAX_ID:
            raise ValueError("clickstream config: ticks * splits * records per tick is too large for int64 ids")

    @property
    def id_slot(self) -> int:
        """Upper bound of the records one split emits in one tick (ids are allotted in slots of this size)."""
        return max(1, self.records_per_tick_per_split + self.late_burst_records + self.bad_records_per_tick)

    def is_producing(self, split: int, tick: int) -> bool:
        """Whether ``split`` emits anything at ``tick``: False for the idle split from ``idle_from_tick`` on."""
        return not (self.idle_split == split and self.idle_from_tick is not None and tick >= self.idle_from_tick)

    def producing_splits(self, tick: int) -> list[int]:
        """The splits that emit records at ``tick``, ascending."""
        return [split for split in range(self.splits) if self.is_producing(split, tick)]

    @classmethod
    def demo(cls) -> ClickstreamConfig:
        """The demo: 4 splits, seed 1, 216 ticks of 5 s (18 simulated minutes; ~18.5 minutes of event time),
        375 records per split per tick (1,500 per tick), split 3 idle from tick 130 (60 %), a burst of 200
        records 5 minutes older than normal at tick 108, one bad record per tick. With
        :data:`DEMO_TICKS_PER_SECOND` the source serves it in about 54 wall seconds."""
        return cls(
            seed=1,
            splits=4,
            records_per_tick_per_split=375,
            tick_ms=5_000,
            ticks=216,
            start_ms=DEFAULT_START_MS,
            source_lateness_ms=120_000,
            jitter_ms=30_000,
            idle_split=3,
            idle_from_tick=130,
            late_burst_tick=108,
            late_burst_records=200,
            late_burst_age_ms=300_000,
            bad_records_per_tick=1,
        )

    def as_options(self) -> dict[str, str]:
        """The config as Spark source options (strings); fields that are None are left out."""
        return {f.name: str(v) for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ClickstreamConfig:
        """Parse string options (as made by :meth:`as_options`). Raises ValueError naming the bad option.

        Keys are matched case-insensitively (Spark lower-cases them); an unknown key is an error, so a typo
        does not silently fall back to a default. Missing keys take the field defaults; ``seed`` is required.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in options.items():
            name = key.lower()
            if name not in fields:
                raise ValueError(f"unknown clickstream option {key!r}; known options: {', '.join(fields)}")
            text = str(raw).strip()
            if text.lower() in ("", "none", "null") and fields[name].default is None:
                values[name] = None
                continue
            try:
                values[name] = int(text)
            except ValueError:
                raise ValueError(f"clickstream option {name!r} must be an integer, got {raw!r}") from None
        if "seed" not in values:
            raise ValueError("clickstream option 'seed' is required")
        return cls(**values)


def tick_processing_time(config: ClickstreamConfig, tick: int) -> int:
    """The simulated processing time of ``tick``, ms since the epoch: ``start_ms + tick * tick_ms``."""
    return config.start_ms + tick * config.tick_ms


def _share(config: ClickstreamConfig, total: int, split: int, tick: int) -> int:
    """``split``'s part of ``total`` records spread over the producing splits of ``tick``."""
    producers = config.producing_splits(tick)
    if total == 0 or split not in producers:
        return 0
    n = len(producers)
    position = (producers.index(split) - tick) % n  # the remainder rotates with the tick
    return total // n + (1 if position < total % n else 0)


def _counts(config: ClickstreamConfig, split: int, tick: int) -> tuple[int, int, int]:
    """(regular, burst, bad) record counts of ``split`` at ``tick``."""
    if not config.is_producing(split, tick):
        return 0, 0, 0
    burst = _share(config, config.late_burst_records, split, tick) if tick == config.late_burst_tick else 0
    return config.records_per_tick_per_split, burst, _share(config, config.bad_records_per_tick, split, tick)


def tick_record_count(config: ClickstreamConfig, tick: int, split: int | None = None) -> int:
    """Number of records (regular + burst + bad) of ``tick``: of one split, or of all splits if ``split`` is None.
    Equals ``len(generate_tick(...))`` without generating anything."""
    splits = range(config.splits) if split is None else [split]
    return sum(sum(_counts(config, s, tick)) for s in splits)


def ts_dtype(config: ClickstreamConfig) -> str:
    """dtype of the ``ts`` column: ``int64``, or pandas' nullable ``Int64`` if the config has bad records."""
    return "Int64" if config.bad_records_per_tick else "int64"


def generate_tick(config: ClickstreamConfig, split: int, tick: int) -> pd.DataFrame:
    """The records ``split`` emits at ``tick`` (``0 <= split < splits``, ``0 <= tick < ticks``).

    Columns ``ts`` (:func:`ts_dtype`; null for bad records), ``channel`` and ``behavior`` (str), ``id`` (int64),
    ``split`` (int32). Regular records first, then burst, then bad records; within them in generation
    order (so ``ts`` is out of order). A pure function of ``(config, split, tick)``.
    """
    if not 0 <= split < config.splits:
        raise ValueError(f"split must be in 0..{config.splits - 1}, got {split}")
    if not 0 <= tick < config.ticks:
        raise ValueError(f"tick must be in 0..{config.ticks - 1}, got {tick}")
    regular, burst, bad = _counts(config, split, tick)
    n = regular + burst + bad
    rng = np.random.default_rng([config.seed, split, tick])
    channel = _CHANNEL_VALUES[rng.integers(0, len(CHANNELS), size=n)]
    behavior = _BEHAVIOR_VALUES[rng.integers(0, len(BEHAVIORS), size=n)]
    newest = tick_processing_time(config, tick) - config.source_lateness_ms
    ts = newest - rng.integers(0, config.jitter_ms + 1, size=regular + burst, dtype=np.int64)
    ts[regular:] -= config.late_burst_age_ms
    first_id = (tick * config.splits + split) * config.id_slot
    ts_column: Any = ts
    if config.bad_records_per_tick:
        ts_column = pd.array(np.concatenate([ts, np.zeros(bad, dtype=np.int64)]), dtype="Int64")
        ts_column[regular + burst :] = pd.NA
    return pd.DataFrame(
        {
            "ts": ts_column,
            "channel": channel,
            "id": np.arange(first_id, first_id + n, dtype=np.int64),
            "behavior": behavior,
            "split": np.full(n, split, dtype=np.int32),
        }
    )


def generate(config: ClickstreamConfig, ticks: int | Iterable[int] | None = None) -> pd.DataFrame:
    """Every record of the run (or of ``ticks``: a count of leading ticks, or the tick numbers), ordered by tick
    then split: the "straight" input a streaming result is checked against."""
    if ticks is None:
        ticks = config.ticks
    tick_list = range(ticks) if isinstance(ticks, int) else list(ticks)
    frames = [generate_tick(config, split, tick) for tick in tick_list for split in range(config.splits)]
    if not frames:
        return _empty(config)
    return pd.concat(frames, ignore_index=True)


def _empty(config: ClickstreamConfig) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.Series([], dtype=ts_dtype(config)),
            "channel": pd.Series([], dtype=object),
            "id": pd.Series([], dtype=np.int64),
            "behavior": pd.Series([], dtype=object),
            "split": pd.Series([], dtype=np.int32),
        }
    )


def straight_counts(frame: pd.DataFrame, window_ms: int = 60_000) -> pd.DataFrame:
    """Per tumbling window and key, the count of records with a timestamp (what a perfect, lossless job says).

    Windows are ``[window_start, window_start + window_ms)`` aligned to the epoch. Returns columns
    ``window_start`` (int64 ms), ``channel``, ``behavior``, ``count`` (int64), sorted by the first three;
    records with a null ``ts`` are not counted.
    """
    if window_ms <= 0:
        raise ValueError(f"window_ms must be > 0, got {window_ms}")
    good = frame[frame["ts"].notna()]
    ts = good["ts"].to_numpy(dtype=np.int64)
    keyed = pd.DataFrame(
        {
            "window_start": ts - np.mod(ts, window_ms),
            "channel": good["channel"].to_numpy(),
            "behavior": good["behavior"].to_numpy(),
        }
    )
    counts = keyed.groupby(["window_start", "channel", "behavior"], sort=True).size()
    return counts.rename("count").reset_index().astype({"window_start": np.int64, "count": np.int64})


def paced_latest_tick(config: ClickstreamConfig, first_tick: int, elapsed_s: float, ticks_per_second: float) -> int:
    """The last tick a paced reader makes available, ``elapsed_s`` wall seconds after it began at ``first_tick``
    (the last tick already read, -1 for none): ``min(ticks - 1, first_tick + 1 + floor(elapsed_s * rate))``.
    The tick after ``first_tick`` is available at once; ``ticks_per_second = inf`` makes every tick available."""
    if math.isinf(ticks_per_second):
        return config.ticks - 1
    return min(config.ticks - 1, first_tick + 1 + math.floor(max(0.0, elapsed_s) * ticks_per_second))


def limit_end_tick(config: ClickstreamConfig, start_tick: int, end_tick: int, max_records: int) -> int:
    """The largest ``e`` in ``(start_tick, end_tick]`` such that ticks ``(start_tick, e]`` hold at most
    ``max_records`` records, but at least ``start_tick + 1`` (one tick is never split). ``end_tick`` itself
    when ``end_tick <= start_tick``."""
    if end_tick <= start_tick:
        return end_tick
    total = 0
    for tick in range(start_tick + 1, end_tick + 1):
        total += tick_record_count(config, tick)
        if total > max_records:
            return max(start_tick + 1, tick - 1)
    return end_tick
