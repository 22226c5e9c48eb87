"""A checkpoint written by floodmark's state format 1 (``data/checkpoint-state-format-1``, made by
``state_format_job.py`` with the floodmark of session 18 before state formats were recorded) resumes: its open
windows come out of the buckets' state and complete with the new input, and it keeps its format (state format 2
applies to new checkpoints). If a change to the operators' snapshots breaks this test, bump ``state_codec.FORMAT``
and add the migration (``state_codec.MIGRATIONS``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from state_format_job import aggregation, first_part, second_part, write_input

from floodmark.apps.outputs import read_output
from floodmark.spark.stateful import state_codec

CHECKPOINT = Path(__file__).with_name("data") / "checkpoint-state-format-1"


def test_a_checkpoint_of_state_format_1_resumes_with_its_open_windows(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(CHECKPOINT, checkpoint)
    assert not list((checkpoint / "floodmark").glob("state-format-*")), "written before formats were recorded"
    input_dir = tmp_path / "in"
    write_input(input_dir, "part-1.json", first_part())
    write_input(input_dir, "part-2.json", second_part())
    # Spark's file source logged the absolute path of the file it read (the machine that made the checkpoint):
    # the checkpoint moves here with its input, as a user moves both.
    source_log = next((checkpoint / "spark" / "sources").glob("*/0"))
    logged = re.sub(r'"path":"[^"]*"', f'"path":"{(input_dir / "part-1.json").as_uri()}"', source_log.read_text())
    source_log.write_text(logged)
    source_log.with_name(".0.crc").unlink()  # Hadoop's checksum of the old text

    query = aggregation(spark, input_dir).run_to_completion(str(checkpoint), str(tmp_path / "out"))

    assert query.reports[0].batch_id > 0, "the query resumed after the batches of the checkpoint"
    panes = read_output(tmp_path / "out", "panes")
    got = {(r.k, r.window_start): (r.n, r.total) for r in panes.itertuples()}
    expected: dict = {}
    for row in first_part() + second_part():
        key = (row["k"], row["ts"] // 60_000 * 60_000)
        n, total = expected.get(key, (0, 0.0))
        expected[key] = (n + 1, total + row["v"])
    assert got == expected, "every window holds the records of both runs"
    # The checkpoint keeps the layout it was created with (one value per bucket): it records format 1, not 2.
    assert (checkpoint / "floodmark" / "state-format-1.json").exists()
    assert not (checkpoint / "floodmark" / f"state-format-{state_codec.FORMAT}.json").exists()
