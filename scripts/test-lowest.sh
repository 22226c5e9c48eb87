#!/usr/bin/env bash
# The lowest declared dependency versions (requirements/lowest.txt, see scripts/lock.sh) in .venv-lowest: the
# core tests, every public name, the README's blocks on real Spark (but the Kafka one), both tick sources and both
# output readers (floodmark's jar loads in the lowest pyspark).
# Run by scripts/test.sh after the suite on the locked versions; needs scripts/setup.sh first (uv, the jar).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
if [ ! -x .venv-lowest/bin/python ]; then
  "$uv" venv --quiet --no-cache -p .venv/bin/python .venv-lowest
fi
# No cache: pyspark is an sdist, and uv kept a ~1.2 GB build of it per run (see docs/STATUS.md, pitfalls).
"$uv" pip install --quiet --no-cache -p .venv-lowest/bin/python -r requirements/lowest.txt
"$uv" pip install --quiet --no-cache -p .venv-lowest/bin/python --no-deps -e .
echo "test-lowest: $(.venv-lowest/bin/python -c 'import numpy, pandas, pyarrow, pyspark
print(f"numpy {numpy.__version__}, pandas {pandas.__version__}, pyarrow {pyarrow.__version__}, pyspark {pyspark.__version__}")')" >&2
.venv-lowest/bin/python -m pytest -p no:cacheprovider tests/core tests/test_public_names.py tests/test_readme.py \
  tests/spark/test_ticks.py tests/spark/test_stage_output.py tests/spark/test_state_parts.py tests/spark/test_jvm_combine.py \
  -k "not kafka" "$@"
