"""The ``floodmark`` command's entry point: the command line when its extra is installed, else one line saying
which extra to install (``pip install 'floodmark[cli]'``), not a traceback."""

from __future__ import annotations

import sys

EXTRAS = {"typer": "cli", "rich": "cli", "pydantic": "cli", "matplotlib": "cli", "pyspark": "spark"}
"""Which extra of floodmark brings each third-party module the commands import."""


def main() -> None:
    try:
        from floodmark.apps.cli import main as cli

        cli()
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if top not in EXTRAS:
            raise
        extra = EXTRAS[top]
        print(
            f"error: this floodmark command needs the '{extra}' extra (no module {top!r}): "
            f"pip install 'floodmark[{extra}]'",
            file=sys.stderr,
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
