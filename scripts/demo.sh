#!/usr/bin/env bash
# Set up (idempotent) and run the main job: seed 001's clickstream analytics on the simulator, on local
# Spark, with seed 000's idle split. Results, late and bad records, timeline.png and summary.txt go to
# ./floodmark-demo (or the directory given with --output). Extra arguments go to `floodmark demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/floodmark demo "$@"
