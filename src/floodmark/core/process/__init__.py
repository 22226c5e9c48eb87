"""Keyed process functions with event-time and processing-time timers, engine-free:
:mod:`~floodmark.core.process.function` (your class, its context and the timer rules),
:mod:`~floodmark.core.process.operator` (runs it per key)."""

from floodmark.core.process.function import KeyedProcessFunction, ProcessContext, TimeDomain, Timer
from floodmark.core.process.operator import (
    KeyedProcessOperator,
    ProcessEmitted,
    ProcessOutput,
    restore_process_operator,
)

__all__ = [
    "KeyedProcessFunction",
    "KeyedProcessOperator",
    "ProcessContext",
    "ProcessEmitted",
    "ProcessOutput",
    "TimeDomain",
    "Timer",
    "restore_process_operator",
]
