#!/usr/bin/env bash
# The JVM host's flush without Spark (bench/jvm/FlushBench.java): bash bench/jvm_flush.sh [keys] [rounds] [jar]
# Compiles the benchmark against floodmark's jar (default: the packaged one; give an older build to compare) and
# Spark's Jackson, and runs it in a 2 GB heap (Spark's local default here). The first round warms the JIT up.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jar="${3:-$root/src/floodmark/jars/floodmark.jar}"
jackson="$(ls "$root"/.venv/lib/python3*/site-packages/pyspark/jars/jackson-*.jar | tr '\n' ':')"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac -d "$out" -cp "$jar:$jackson" "$root/bench/jvm/FlushBench.java"
limits="$("$root/.venv/bin/python" -c 'from floodmark.core import segments; print(segments.DEFER_ABOVE, segments.FANOUT)')"
# shellcheck disable=SC2086  # two numbers, split on purpose
java -Xmx2g -cp "$jar:$jackson:$out" FlushBench "${1:-432000}" "${2:-4}" $limits
