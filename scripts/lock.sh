#!/usr/bin/env bash
# Regenerate the two lock files from pyproject.toml's ranges (uv, from the test extra):
#   requirements/lock.txt    the versions development and CI install (scripts/setup.sh); existing pins are kept
#                            unless a range excludes them (pass --upgrade to move everything to the newest)
#   requirements/lowest.txt  the lowest version of every direct dependency (CI's lowest-versions run)
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
extras=(--extra spark --extra connect --extra cli --extra kafka --extra test)
# 3.11.7: a patch level the docs tools accept (pymdown-extensions needs >=3.11.5); 3.11 is the tested Python.
"$uv" pip compile --quiet --no-header --python-version 3.11.7 pyproject.toml "${extras[@]}" --extra docs \
  -o requirements/lock.txt "$@"
"$uv" pip compile --quiet --no-header --python-version 3.11.7 pyproject.toml "${extras[@]}" \
  --resolution lowest-direct -o requirements/lowest.txt
