"""A busy machine delays a query, it does not kill it (issue 39).

On a saturated machine Spark 4.3 gives up on a Python worker that does not connect back within a fixed 10 s
(``PythonWorkerFactory``): at a query's start that is the driver-side worker of ``transformWithStateInPandas``,
and the query fails with "Python worker failed to connect back". Here the machine is made that slow for that one
worker, for real: ``PYSPARK_PYTHON`` is a wrapper that sleeps 14 s before the first such worker starts. The
handle starts the query again from its checkpoint, says so in one line, and the results are exact; while it
does, the handle's ``isActive``, ``exception()`` and ``status`` say the query runs and restarts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("busy_machine_driver.py")

SLOW_PYTHON = """#!/bin/sh
case "$*" in
  *transform_with_state_driver_worker*)
    if [ ! -e "{marker}" ]; then touch "{marker}"; sleep 14; fi ;;
esac
exec "{python}" "$@"
"""


def test_a_python_worker_too_slow_to_start_delays_the_query_and_loses_nothing(tmp_path):
    wrapper = tmp_path / "slow-python"
    wrapper.write_text(SLOW_PYTHON.format(marker=tmp_path / "slowed", python=sys.executable))
    wrapper.chmod(0o755)
    env = {**os.environ, "PYSPARK_PYTHON": str(wrapper)}
    result = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "run")], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "slowed").exists(), "the slow start happened"
    said = [line for line in result.stderr.splitlines() if "starting the query again" in line]
    assert said == [
        "floodmark: Python worker failed to connect back (a busy machine?): starting the query again from its "
        "checkpoint (1 of 3)"
    ]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    # While the handle started the failed query again, the floodmark query was running (recovering), and said so.
    looks = out.pop("while_restarting")
    assert looks["looks"] >= 3, "the handle was looked at while it restarted the query (busy_machine_driver.py)"
    restarting = {
        "message": "restarting after Python worker failed to connect back (a busy machine?): attempt 1 of 3, "
        "starting the query",
        "isDataAvailable": False,
        "isTriggerActive": False,
    }
    assert looks == {
        **looks,
        "isActive": [True],
        "exception": ["None"],
        "status": [json.dumps(restarting, sort_keys=True)],
    }
    assert out == {"restarts": 1, "counts": [10] * 10, "rows_in": 100, "after": {"isActive": False, "exception": None}}
    assert "Traceback" not in result.stderr and "NullPointerException" not in result.stderr
