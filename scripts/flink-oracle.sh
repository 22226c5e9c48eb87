#!/usr/bin/env bash
# The Flink oracle (test-only, not part of CI's default run): Apache Flink from PyPI in build/flink-oracle, for
# tests/core/test_flink_oracle.py, which compares floodmark's cumulate windows and interval join with real Flink.
#   bash scripts/flink-oracle.sh && FLOODMARK_FLINK_ORACLE=1 .venv/bin/python -m pytest tests/core/test_flink_oracle.py
# Needs Java 17 with javac (the interval join runs Flink's Java API: PyFlink's Python API has none). ~850 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x build/flink-oracle/bin/python ]; then
  "$PYTHON" -m venv build/flink-oracle
fi
build/flink-oracle/bin/python -m pip install --quiet --disable-pip-version-check "apache-flink==2.3.0"
echo "flink-oracle: ready (build/flink-oracle, apache-flink 2.3.0)" >&2
