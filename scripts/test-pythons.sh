#!/usr/bin/env bash
# The other Pythons floodmark declares (pyproject.toml's classifiers): for each, a virtualenv (.venv-pyX.Y) with the
# locked versions, then the core tests and a Spark smoke run (the README's pipeline, a real query on local Spark;
# a session of one's own; the harness example). The whole suite runs on 3.11 (scripts/test.sh). An interpreter is found as pythonX.Y on PATH or under
# pyenv's versions; a declared Python that cannot be found fails the run (declared means tested).
# Run by scripts/test.sh after the lowest versions; needs scripts/setup.sh first (uv, the jar).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
versions=$(sed -n 's/.*"Programming Language :: Python :: \(3\.[0-9]*\)".*/\1/p' pyproject.toml | grep -v '^3\.11$')
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
for version in $versions; do
  # pyenv's own interpreter first: its shim on PATH answers only when that version is selected.
  python=$(ls -d "$pyenv_root"/versions/"$version".*/bin/"python$version" 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$python" ]; then
    python=$(command -v "python$version" || true)
  fi
  if [ -z "$python" ] || ! "$python" -c pass 2>/dev/null; then
    echo "test-pythons: Python $version is declared (pyproject.toml) but not found (python$version, pyenv)" >&2
    exit 1
  fi
  venv=.venv-py$version
  if [ ! -x "$venv/bin/python" ]; then
    "$uv" venv --quiet --no-cache -p "$python" "$venv"
  fi
  # No cache: pyspark is an sdist, and uv would keep a ~1.2 GB build of it per run (docs/STATUS.md, pitfalls).
  "$uv" pip install --quiet --no-cache -p "$venv/bin/python" -r requirements/lock.txt
  "$uv" pip install --quiet --no-cache -p "$venv/bin/python" --no-deps -e .
  echo "test-pythons: $("$venv/bin/python" --version) ($python)" >&2
  # The Spark smoke run: the README's pipeline (a real query on local Spark) and a session of one's own.
  "$venv/bin/python" -m pytest -p no:cacheprovider tests/core tests/test_readme.py \
    -k "not test_readme or pipeline_in_20_lines or install_it_in_your_own_spark or harness_example" "$@"
done
