#!/usr/bin/env bash
# Set up (idempotent) and run every check CI runs: ruff, the documentation site (strict: any warning fails),
# the whole test suite on the locked dependency versions, then the core tests and a Spark smoke run on the
# lowest declared versions (scripts/test-lowest.sh). Arguments go to the main suite's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir build/site
.venv/bin/python -m pytest "$@"
bash scripts/test-lowest.sh -q
