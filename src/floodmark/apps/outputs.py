"""Reading a run's outputs back, and writing the clickstream job's text lines.

A query writes Parquet per batch id under its output root (``panes/``, ``late/``,
``dead_letter/``; see :meth:`~floodmark.spark.outputs.sinks.Outputs.files`). These helpers
read them with pandas (no Spark needed) and render panes as the clickstream job's lines::

    20260101000000 20260101000100 a CLICK 123
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from floodmark.core.time import format_compact

OUTPUT_KINDS = ("panes", "late", "dead_letter")


def read_output(root: str | Path, kind: str) -> pd.DataFrame:
    """All rows of one output (``panes``, ``late`` or ``dead_letter``) with their ``batch_id``; empty if none."""
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output {kind!r}: use one of {OUTPUT_KINDS}")
    return read_folder(Path(root) / kind)


def read_folder(directory: Path) -> pd.DataFrame:
    """All rows of the Parquet output in ``directory`` (``batch_id=N`` folders) with their ``batch_id``; empty if
    none."""
    frames = []
    for part in sorted(directory.glob("batch_id=*")) if directory.exists() else []:
        files = sorted(part.glob("*.parquet"))
        if not files:
            continue
        frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        frame["batch_id"] = int(part.name.split("=", 1)[1])
        frames.append(frame)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def text_lines(panes: pd.DataFrame, key_columns: Sequence[str], value_columns: Sequence[str]) -> list[str]:
    """One line per pane, ``start end key... value...``, ordered by window, then key, then pane index."""
    if panes.empty:
        return []
    ordered = panes.sort_values(["window_start", "window_end", *key_columns, "pane_index"], kind="stable")
    lines = []
    for row in ordered.to_dict("records"):
        values = [_text(row[c]) for c in value_columns]
        keys = [str(row[c]) for c in key_columns]
        lines.append(" ".join([format_compact(row["window_start"]), format_compact(row["window_end"]), *keys, *values]))
    return lines


def write_text_lines(
    panes: pd.DataFrame, key_columns: Sequence[str], value_columns: Sequence[str], path: str | Path
) -> Path:
    """Write :func:`text_lines` to ``path`` (one per line); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = text_lines(panes, key_columns, value_columns)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
