"""Package names imported on first use (PEP 562), so that importing one small module stays cheap.

Spark starts Python processes of its own that import a single floodmark module: the tick source
(:mod:`floodmark.spark.sources.ticks`) is unpickled in the data-source planner processes of the driver, on the
critical path of a query's first batch. Importing a submodule runs its packages' ``__init__`` first; if those
imported every public name eagerly, each such process would load pandas, pyarrow and the whole engine
(~0.6 s each; `bench/all.py`'s peak Python memory for 1M keys went 1,492 -> 1,218 MB without it) for a
class that needs none of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each public name to the module it lives in
    (a name that is itself a module, like ``floodmark.windows``, maps to its parent package)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = importlib.import_module(exports[name])
        if not hasattr(home, name):
            # A submodule is an attribute of its package only once something has imported it.
            importlib.import_module(f"{exports[name]}.{name}")
        value = getattr(home, name)
        globals_of_package = importlib.import_module(package).__dict__
        globals_of_package[name] = value  # later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*importlib.import_module(package).__dict__, *exports})

    return __getattr__, __dir__
