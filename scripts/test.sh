#!/usr/bin/env bash
# Set up (idempotent) and run every check CI runs: ruff, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
