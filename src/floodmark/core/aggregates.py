"""Incremental aggregations (Flink's ``AggregateFunction``, Beam's ``CombineFn``).

An :class:`Aggregate` keeps one small accumulator per (key, window) and never
buffers raw records (except :func:`collect_list` and :class:`FullWindow`, whose
result *is* the records). The contract:

* ``create()`` -> a new, empty accumulator;
* ``add_many(acc, values)`` -> the accumulator after adding ``values``, a 1-d
  numpy array (possibly of dtype object) of the aggregate's input values, in
  arrival order; the built-ins do it with one numpy reduction;
* ``merge(accs)`` -> one accumulator combining several (session merges,
  combining partial results);
* ``result(acc)`` -> the value a pane carries.

Accumulators must be picklable: they are snapshotted into the runtime's state.
Each aggregate reads one input: ``field`` names the record field (a DataFrame
column on Spark); ``None`` means the whole value (the harness's element value).
:func:`several` runs several aggregates side by side and yields a ``dict``.

Columnar form: an aggregate whose accumulator is a few numbers also declares
them (:meth:`Aggregate.columnar_accumulators`: one :class:`Reduction` per number)
and how its result comes from them (:meth:`Aggregate.columnar_result`). The
columnar operator keeps them as numpy columns for every window at once, the
map-side combine (Arrow on Spark) makes partials of them, and both combine them
with the same reductions; :func:`columnar_layout` is that form for a whole
(possibly ``several``) aggregate, ``None`` when some part has none (collect_list,
user-defined and full-window aggregates run on the general policy).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


class Reduction:
    """How one numeric accumulator column is made from records and combined (vectorised).

    :ivar name: the reduction's name, also Arrow's hash-aggregate function (``count``, ``sum``, ``min``, ``max``).
    :ivar dtype: the column's numpy dtype. :ivar empty: the value of a window without records, the identity
        of :meth:`merge` (NaN for min and max: "none yet", an empty pane's result is None).
    :ivar reads_values: False for ``count`` (it counts records, whatever their values).
    """

    name: str
    dtype: type
    empty: Any
    reads_values = True

    def of_groups(self, values: np.ndarray, group: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """One value per group of ``values`` (sorted by group id ``group``; group ``i`` starts at ``bounds[i]``)."""
        raise NotImplementedError

    def merge(self, state: np.ndarray, incoming: np.ndarray) -> np.ndarray:
        """Element-wise combination of two accumulator columns."""
        raise NotImplementedError

    def reduce_at(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Combine accumulator rows sorted by group into one per group (groups start at ``bounds``)."""
        raise NotImplementedError

    def cumulate(self, values: np.ndarray, group: np.ndarray) -> np.ndarray:
        """The running combination within each group, in order (accumulating panes)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Reduction({self.name})"


# Sums of finite doubles may overflow to +-inf (IEEE 754, as Spark's sum of doubles): a documented result,
# not something to warn the user's console about.
_IEEE = np.errstate(over="ignore", invalid="ignore")


class _Additive(Reduction):
    @_IEEE
    def merge(self, state: np.ndarray, incoming: np.ndarray) -> np.ndarray:
        return state + incoming

    @_IEEE
    def reduce_at(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, bounds) if len(values) else values

    @_IEEE
    def cumulate(self, values: np.ndarray, group: np.ndarray) -> np.ndarray:
        return pd.Series(values).groupby(group).cumsum().to_numpy().astype(self.dtype)


class _Count(_Additive):
    name, dtype, empty, reads_values = "count", np.int64, 0, False

    def of_groups(self, values: np.ndarray, group: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        return np.bincount(group, minlength=len(bounds)).astype(np.int64)


class _Sum(_Additive):
    name, dtype, empty = "sum", np.float64, 0.0

    @_IEEE
    def of_groups(self, values: np.ndarray, group: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=len(bounds))


class _Extreme(Reduction):
    dtype, empty = np.float64, np.nan
    ufunc: np.ufunc  # fmin/fmax: NaN (no value yet) loses against any number

    def of_groups(self, values: np.ndarray, group: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        return self.reduce_at(values, bounds)

    def merge(self, state: np.ndarray, incoming: np.ndarray) -> np.ndarray:
        return self.ufunc(state, incoming)

    def reduce_at(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        return self.ufunc.reduceat(values, bounds) if len(values) else values

    def cumulate(self, values: np.ndarray, group: np.ndarray) -> np.ndarray:
        grouped = pd.Series(values).groupby(group)
        return (grouped.cummin() if self.ufunc is np.fmin else grouped.cummax()).to_numpy()


class _Min(_Extreme):
    name, ufunc = "min", np.fmin


class _Max(_Extreme):
    name, ufunc = "max", np.fmax


COUNT, SUM, MIN, MAX = _Count(), _Sum(), _Min(), _Max()


class Aggregate:
    """Base class; see the module docstring for the contract."""

    field: str | None = None

    def create(self) -> Any:
        raise NotImplementedError

    def add_many(self, acc: Any, values: np.ndarray) -> Any:
        raise NotImplementedError

    def merge(self, accs: Sequence[Any]) -> Any:
        raise NotImplementedError

    def result(self, acc: Any) -> Any:
        return acc

    result_kind = "any"
    """What a pane's value is: ``"int"``, ``"float"``, ``"list"`` (of input values) or ``"any"`` (a runtime with
    typed columns writes it as JSON text)."""

    numeric_input = False
    """The aggregate reads numbers: a record whose input is missing or not a number is a bad record."""

    results_combine: str | None = None
    """How the results of DISCARDING panes of one window combine into the window's result (what one
    ACCUMULATING pane would show): ``"sum"``, ``"min"``, ``"max"``, ``"concat"`` (lists, in pane order), or
    ``None`` when results alone cannot be combined (:mod:`floodmark.core.window_results`)."""

    @property
    def fields(self) -> list[str | None]:
        """Every input field this aggregate reads."""
        return [self.field]

    @property
    def numeric_fields(self) -> list[str | None]:
        """The input fields read as numbers: a record whose value there is not a finite number is a bad record
        (:func:`floodmark.core.assign.validate_numbers`); the aggregate then gets them as ``float64``."""
        return [self.field] if self.numeric_input else []

    def columnar_accumulators(self) -> list[tuple[str, Reduction]] | None:
        """The accumulator as named numeric columns, ``[(suffix, reduction)]``; ``None``: no columnar form."""
        return None

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Pane results from the accumulator columns (``{suffix: array}``), vectorised."""
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Aggregate):
    """Number of records (``field`` is ignored)."""

    results_combine = "sum"

    field: str | None = None
    result_kind = "int"

    def create(self) -> int:
        return 0

    def add_many(self, acc: int, values: np.ndarray) -> int:
        return acc + len(values)

    def merge(self, accs: Sequence[int]) -> int:
        return int(builtins.sum(accs))

    def columnar_accumulators(self) -> list[tuple[str, Reduction]]:
        return [("n", COUNT)]

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return columns["n"]


def _numeric(values: np.ndarray) -> np.ndarray:
    # The operators hand numeric aggregates validated float64 (floodmark.core.assign.validate_numbers).
    return values if values.dtype == np.float64 else values.astype(np.float64)


@dataclass(frozen=True)
class Sum(Aggregate):
    """Sum of ``field`` as a double (IEEE 754, like Spark's ``sum`` of doubles). An empty window sums to 0.

    Integer inputs are added as doubles: exact while the sum stays within 2**53, never wrapping; a sum beyond
    ~1.8e308 is +-inf. Inputs that are missing, NaN or infinite are bad records (see ``numeric_fields``).
    """

    results_combine = "sum"

    field: str | None = None
    result_kind = "float"
    numeric_input = True

    def create(self) -> Any:
        return 0.0

    @_IEEE
    def add_many(self, acc: Any, values: np.ndarray) -> Any:
        if len(values) == 0:
            return acc
        return acc + float(_numeric(values).sum())

    def merge(self, accs: Sequence[Any]) -> Any:
        return builtins.sum(accs)

    def columnar_accumulators(self) -> list[tuple[str, Reduction]]:
        return [("v", SUM)]

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return columns["v"]


@dataclass(frozen=True)
class Min(Aggregate):
    """Smallest value of ``field``; ``None`` for an empty pane."""

    results_combine = "min"

    field: str | None = None
    result_kind = "float"
    numeric_input = True

    def create(self) -> Any:
        return None

    def add_many(self, acc: Any, values: np.ndarray) -> Any:
        if len(values) == 0:
            return acc
        low = _numeric(values).min().item()
        return low if acc is None else builtins.min(acc, low)

    def merge(self, accs: Sequence[Any]) -> Any:
        present = [a for a in accs if a is not None]
        return builtins.min(present) if present else None

    def columnar_accumulators(self) -> list[tuple[str, Reduction]]:
        return [("v", MIN)]

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return columns["v"]


@dataclass(frozen=True)
class Max(Aggregate):
    """Largest value of ``field``; ``None`` for an empty pane."""

    results_combine = "max"

    field: str | None = None
    result_kind = "float"
    numeric_input = True

    def create(self) -> Any:
        return None

    def add_many(self, acc: Any, values: np.ndarray) -> Any:
        if len(values) == 0:
            return acc
        high = _numeric(values).max().item()
        return high if acc is None else builtins.max(acc, high)

    def merge(self, accs: Sequence[Any]) -> Any:
        present = [a for a in accs if a is not None]
        return builtins.max(present) if present else None

    def columnar_accumulators(self) -> list[tuple[str, Reduction]]:
        return [("v", MAX)]

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return columns["v"]


@dataclass(frozen=True)
class Mean(Aggregate):
    """Arithmetic mean of ``field`` as a float; ``None`` for an empty pane.

    The accumulator is ``(sum, count)`` so that means merge exactly.
    """

    field: str | None = None
    result_kind = "float"
    numeric_input = True

    def create(self) -> tuple[float, int]:
        return (0.0, 0)

    @_IEEE
    def add_many(self, acc: tuple[float, int], values: np.ndarray) -> tuple[float, int]:
        if len(values) == 0:
            return acc
        return (acc[0] + float(_numeric(values).sum()), acc[1] + len(values))

    def merge(self, accs: Sequence[tuple[float, int]]) -> tuple[float, int]:
        return (builtins.sum(a[0] for a in accs), builtins.sum(a[1] for a in accs))

    def result(self, acc: tuple[float, int]) -> float | None:
        return acc[0] / acc[1] if acc[1] else None

    def columnar_accumulators(self) -> list[tuple[str, Reduction]]:
        return [("s", SUM), ("n", COUNT)]

    def columnar_result(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        n = columns["n"]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, columns["s"] / np.maximum(n, 1), np.nan)


@dataclass(frozen=True)
class CollectList(Aggregate):
    """All values of ``field`` in arrival order (buffers them: its result is the records)."""

    results_combine = "concat"

    field: str | None = None
    result_kind = "list"

    def create(self) -> list[Any]:
        return []

    def add_many(self, acc: list[Any], values: np.ndarray) -> list[Any]:
        return acc + values.tolist()

    def merge(self, accs: Sequence[list[Any]]) -> list[Any]:
        merged: list[Any] = []
        for acc in accs:
            merged.extend(acc)
        return merged

    def result(self, acc: list[Any]) -> list[Any]:
        return list(acc)


class UserAggregate(Aggregate):
    """A user-defined aggregate from four functions (Flink's ``AggregateFunction``).

    :arg create: ``() -> acc``. :arg add: ``(acc, value) -> acc``.
    :arg merge: ``(acc, acc) -> acc``; needed for session windows.
    :arg result: ``acc -> value``. :arg field: the input field (None = whole value).
    """

    def __init__(
        self,
        create: Callable[[], Any],
        add: Callable[[Any, Any], Any],
        merge: Callable[[Any, Any], Any] | None = None,
        result: Callable[[Any], Any] | None = None,
        field: str | None = None,
    ) -> None:
        self._create = create
        self._add = add
        self._merge = merge
        self._result = result
        self.field = field

    def create(self) -> Any:
        return self._create()

    def add_many(self, acc: Any, values: np.ndarray) -> Any:
        for value in values.tolist():
            acc = self._add(acc, value)
        return acc

    def merge(self, accs: Sequence[Any]) -> Any:
        if self._merge is None:
            raise TypeError("this aggregate has no merge function; session windows need one")
        merged = accs[0]
        for acc in accs[1:]:
            merged = self._merge(merged, acc)
        return merged

    def result(self, acc: Any) -> Any:
        return acc if self._result is None else self._result(acc)


class FullWindow(Aggregate):
    """A full-window function: buffers every value and calls ``fn(values)`` when the pane fires.

    For logic that needs all elements at once (a median, a sort). It costs memory
    proportional to the window's contents, unlike the incremental aggregates.
    """

    def __init__(self, fn: Callable[[list[Any]], Any], field: str | None = None) -> None:
        self.fn = fn
        self.field = field

    def create(self) -> list[Any]:
        return []

    def add_many(self, acc: list[Any], values: np.ndarray) -> list[Any]:
        return acc + values.tolist()

    def merge(self, accs: Sequence[list[Any]]) -> list[Any]:
        return [v for acc in accs for v in acc]

    def result(self, acc: list[Any]) -> Any:
        return self.fn(list(acc))


class Several(Aggregate):
    """Several named aggregates over one window; the result is ``{name: result}``."""

    def __init__(self, parts: dict[str, Aggregate]) -> None:
        if not parts:
            raise ValueError("several() needs at least one aggregate")
        for name, part in parts.items():
            if not isinstance(part, Aggregate):
                raise TypeError(f"aggregate {name!r} is {type(part).__name__}, not an Aggregate")
        self.parts = dict(parts)

    @property
    def fields(self) -> list[str | None]:
        return [part.field for part in self.parts.values()]

    @property
    def numeric_fields(self) -> list[str | None]:
        return list(dict.fromkeys(f for part in self.parts.values() for f in part.numeric_fields))

    def create(self) -> dict[str, Any]:
        return {name: part.create() for name, part in self.parts.items()}

    def add_many(self, acc: dict[str, Any], values: np.ndarray) -> dict[str, Any]:
        raise TypeError("Several reads several fields: use add_many_fields")

    def add_many_fields(self, acc: dict[str, Any], columns: dict[str | None, np.ndarray]) -> dict[str, Any]:
        return {name: part.add_many(acc[name], columns[part.field]) for name, part in self.parts.items()}

    def merge(self, accs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {name: part.merge([a[name] for a in accs]) for name, part in self.parts.items()}

    def result(self, acc: dict[str, Any]) -> dict[str, Any]:
        return {name: part.result(acc[name]) for name, part in self.parts.items()}


@dataclass(frozen=True)
class AccumulatorColumn:
    """One numeric accumulator column: ``name`` (``"<part>.<suffix>"``), its reduction, the field it reduces
    (``None`` for counts)."""

    name: str
    reduction: Reduction
    field: str | None


@dataclass(frozen=True)
class ColumnarLayout:
    """An aggregate in columnar form: its accumulator columns and how pane results come from them.

    :ivar parts: the named aggregates (``{"value": aggregate}`` for a single one).
    :ivar single: the aggregate is not ``several``: its result is one value, not a dict.
    :ivar columns: every accumulator column of every part, in order.
    """

    parts: dict[str, Aggregate]
    single: bool
    columns: tuple[AccumulatorColumn, ...]

    @property
    def value_fields(self) -> list[str | None]:
        """The record fields some column reduces, each once, in order."""
        return list(dict.fromkeys(c.field for c in self.columns if c.reduction.reads_values))

    def results(self, accumulators: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``{part: results}`` from ``{column name: values}`` (e.g. rows of the state, or partials)."""
        results = {}
        for name, part in self.parts.items():
            suffixes = [suffix for suffix, _ in part.columnar_accumulators() or ()]
            results[name] = part.columnar_result({s: accumulators[f"{name}.{s}"] for s in suffixes})
        return results


def columnar_layout(aggregate: Aggregate) -> ColumnarLayout | None:
    """The columnar form of ``aggregate`` (see the module docstring), or ``None`` if a part has none."""
    single = not isinstance(aggregate, Several)
    parts = {"value": aggregate} if single else aggregate.parts
    columns = []
    for name, part in parts.items():
        accumulators = part.columnar_accumulators()
        if accumulators is None:
            return None
        for suffix, reduction in accumulators:
            field = part.field if reduction.reads_values else None
            columns.append(AccumulatorColumn(f"{name}.{suffix}", reduction, field))
    return ColumnarLayout(dict(parts), single, tuple(columns))


def add_columns(aggregate: Aggregate, acc: Any, columns: dict[str | None, np.ndarray]) -> Any:
    """Add a slice of records, given as ``{field: values}``, to ``acc``."""
    if isinstance(aggregate, Several):
        return aggregate.add_many_fields(acc, columns)
    return aggregate.add_many(acc, columns[aggregate.field])


def count() -> Count:
    """Number of records."""
    return Count()


def sum(field: str | None = None) -> Sum:  # noqa: A001 - mirrors SQL's name, module-qualified
    """Sum of ``field`` (or of the values)."""
    return Sum(field)


def min(field: str | None = None) -> Min:  # noqa: A001
    """Minimum of ``field``."""
    return Min(field)


def max(field: str | None = None) -> Max:  # noqa: A001
    """Maximum of ``field``."""
    return Max(field)


def mean(field: str | None = None) -> Mean:
    """Mean of ``field``."""
    return Mean(field)


def collect_list(field: str | None = None) -> CollectList:
    """Every value of ``field`` in arrival order."""
    return CollectList(field)


def several(**parts: Aggregate) -> Several:
    """``several(n=count(), total=sum("amount"))`` -> panes carry ``{"n": ..., "total": ...}``."""
    return Several(parts)
