"""The CLI's help and option validation (no Spark: every failure here happens before a session starts)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from floodmark.apps.cli import app

runner = CliRunner(env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})


@pytest.mark.parametrize("command", ["demo", "replay", "explain", "advise"])
def test_every_command_has_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--ticks-per-second", "0"], "ticks-per-second"),
        (["demo", "chess"], "unknown scenario"),
        (["demo", "games", "--kafka"], "clickstream scenario only"),
        (["replay", "/nonexistent/input", "--key-by", "k"], "does not exist"),
        (["replay", ".", "--key-by", "k", "--bound", "soon"], "not a duration"),
        (["replay", ".", "--key-by", "k", "--aggregate", "median"], "name=count"),
        (["replay", ".", "--key-by", "k", "--format", "csv"], "csv"),
        (["explain", "/nonexistent/run", "--key", "a", "--window-start", "2026-01-01T00:00"], "pipeline.json"),
        (["explain", ".", "--key", "a", "--window-start", "yesterday"], "ISO date-time"),
        (["advise", "/nonexistent/records.jsonl"], "does not exist"),
    ],
)
def test_bad_options_exit_non_zero_with_a_clear_message(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert message in result.output


def test_advise_prints_the_tradeoff(tmp_path):
    path = tmp_path / "records.jsonl"
    rows = [{"ts": t, "p": t % 2} for t in [0, 10, 5, 20, 30, 2, 40, 50, 45]]
    path.write_text("".join(f'{{"ts": {r["ts"]}, "p": {r["p"]}}}\n' for r in rows))
    result = runner.invoke(app, ["advise", str(path), "--split", "p", "--target", "0.2"])
    assert result.exit_code == 0, result.output
    assert "bound" in result.output and "allowed lateness" in result.output
