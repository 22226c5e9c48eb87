#!/usr/bin/env bash
# Set up (idempotent) and run every check CI runs: ruff, the documentation site (strict: any warning fails),
# the whole test suite on the locked dependency versions, then the core tests and a Spark smoke run on the
# lowest declared versions (scripts/test-lowest.sh) and on the other declared Pythons (scripts/test-pythons.sh).
# Arguments go to the main suite's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Every temporary file of the run (pytest's directories, Spark's local dirs and the native libraries each JVM
# unpacks, which a kill -9 test leaves behind) under build/tmp, emptied at the start of the next run: a machine
# that runs the suite again and again does not fill up. Passing tests' directories go as they pass (pyproject.toml).
export TMPDIR="$PWD/build/tmp"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
.venv/bin/ruff check .
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir build/site
.venv/bin/python -m pytest --durations=15 "$@"  # the slowest tests, for whoever keeps the suite under 45 min
bash scripts/test-lowest.sh -q
bash scripts/test-pythons.sh -q
