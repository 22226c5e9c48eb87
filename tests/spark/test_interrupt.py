"""Ctrl-C while a floodmark query's handle waits: the query stops, and the program ends with a few lines.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: here to the driver process (PySpark starts
its JVM with SIGINT ignored). PySpark's handler raised KeyboardInterrupt in the middle of the py4j call that waits
(``awaitTermination``), and py4j logged some 90 lines of tracebacks about it. The handle's waits now notice Ctrl-C
outside py4j, stop the query, say so in one line and raise KeyboardInterrupt; starting the query again from its
checkpoint resumes it exactly-once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("interrupt_driver.py")
STOPPING = "floodmark: interrupted: stopping the query (starting it again from its checkpoint resumes it)"


def batches_done(checkpoint: Path) -> int:
    metrics = checkpoint / "floodmark" / "metrics.jsonl"
    return len(metrics.read_text().splitlines()) if metrics.exists() else 0


def interrupted(mode: str, root: Path) -> list[str]:
    """Run the driver in ``mode``, press Ctrl-C two batches into its run; returns the lines it wrote after."""
    log = root / f"{mode}.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    before = batches_done(root / "ckpt")
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), mode, str(root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 300
        while batches_done(root / "ckpt") < before + 2:
            assert driver.poll() is None, f"the driver ended before Ctrl-C:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no batch in 300 s"
            time.sleep(0.05)
        written = log.stat().st_size
        os.killpg(driver.pid, signal.SIGINT)
        assert driver.wait(timeout=120) == -signal.SIGINT, log.read_text()[-3000:]  # KeyboardInterrupt's exit
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert batches_done(root / "ckpt") < 21, "interrupted before the end of input (20 files, then the flush)"
    return log.read_bytes()[written:].decode().splitlines()


def test_ctrl_c_in_the_waits_stops_the_query_in_a_few_lines_and_a_new_start_resumes_exactly_once(tmp_path):
    for mode, wait in (("await", "awaitTermination"), ("complete", "finish_when_input_exhausted")):
        said = interrupted(mode, tmp_path)
        text = "\n".join(said)
        assert said[:2] == [STOPPING, "Traceback (most recent call last):"], text
        assert said[-1] == "KeyboardInterrupt", text
        # The rest is Python's traceback of the program's call, down to the handle's wait: nothing of py4j's
        # tracebacks, of Spark's log or of its Java stack traces.
        assert all(line.startswith("  ") for line in said[2:-1]), text
        assert f", in {wait}" in said[-3] + said[-4], text
        assert len(said) <= 14 and "py4j" not in text and "\tat " not in text, text
    done = subprocess.run(
        [sys.executable, str(DRIVER), "complete", str(tmp_path)],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"counts": [10] * 20}, "every record once"
