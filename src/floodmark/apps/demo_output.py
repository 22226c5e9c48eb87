"""A demo's output directory: replaced when it holds an earlier run of the same demo, refused otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

from floodmark.driver.checkpoint_files import require_directory


def prepare(output: Path, marker: str, demo: str) -> None:
    """Make ``output`` an empty directory holding ``marker`` (the file that says which demo wrote it).

    :raises FileExistsError: ``output`` exists without ``marker`` (not an earlier run of ``demo``).
    """
    require_directory(output, "the output directory")
    if output.exists():
        if not (output / marker).exists():
            raise FileExistsError(f"{output} exists and is not an earlier {demo} demo: choose another --output")
        shutil.rmtree(output)
    output.mkdir(parents=True)
    (output / marker).write_text(f"written by floodmark demo {demo}\n")
