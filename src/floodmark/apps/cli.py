"""The ``floodmark`` command: demo, replay, explain and advise.

Every command validates its options before starting Spark, prints what went
wrong in one line, and exits non-zero on failure (2 for bad options, 1 for a
failed run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from floodmark.apps.config import PipelineConfig, WindowConfig
from floodmark.core.time import parse_duration, parse_instant

app = typer.Typer(
    help="floodmark: Flink/Beam-grade event time (per-split watermarks, idleness, lateness) for PySpark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)


def _say(text: object, **options) -> None:
    """Print ``text`` on stdout; a line longer than the terminal stays one line when stdout is a file or a pipe
    (rich would wrap it at 80 columns there: a log's tables broken in two), and the terminal wraps it on one."""
    console.print(text, soft_wrap=not console.is_terminal, **options)


def _fail(message: str, code: int = 1) -> typer.Exit:
    errors.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)  # one line, however long
    return typer.Exit(code)


def _parsed(parse: Callable[[str], int], value: str, option: str) -> int:
    """``parse(value)``, a parse error reported against ``option``."""
    try:
        return parse(value)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=option) from None


def _duration(value: str | None, option: str) -> int | None:
    return None if value is None else _parsed(parse_duration, value, option)


@app.command()
def demo(
    scenario: Annotated[
        str,
        typer.Argument(
            help="clickstream: 1-minute counts with an idle split and late records (default); games: a two-stage "
            "session pipeline, END_OF_WINDOW vs EARLIEST, with percentile watermarks; searches: queries joined to "
            "their clicks, click-through per 30 s, abandoned searches by event-time timers."
        ),
    ] = "clickstream",
    output: Annotated[
        Path | None,
        typer.Option(
            help="Directory for results, late/bad records, the PNG and the summary "
            "(default: floodmark-demo, floodmark-games for games, floodmark-searches for searches)."
        ),
    ] = None,
    ticks_per_second: Annotated[
        float, typer.Option(min=0.1, max=1000.0, help="Simulator speed: 5 s of event time per tick.")
    ] = 4.0,
    seed: Annotated[int, typer.Option(min=0, help="Simulator seed (the run is deterministic under it).")] = 1,
    live: Annotated[bool, typer.Option(help="Show the live watermark view while the query runs.")] = True,
    kafka: Annotated[
        bool,
        typer.Option(
            "--kafka",
            help="Run between real Kafka topics: a broker on loopback (from scripts/setup.sh's jars), the simulator "
            "fed into a 4-partition topic, results, late records and dead letters to three topics.",
        ),
    ] = False,
) -> None:
    """Run a demo job on its simulator (local Spark): the clickstream job, the game-session pipeline or the searches."""
    import dataclasses

    if scenario not in ("clickstream", "games", "searches"):
        raise typer.BadParameter(
            f"unknown scenario {scenario!r}: use clickstream, games or searches", param_hint="SCENARIO"
        )
    if scenario == "searches":
        if kafka:
            raise typer.BadParameter("--kafka runs the clickstream scenario only", param_hint="--kafka")
        from floodmark.apps.searches_demo import demo_config as searches_config
        from floodmark.apps.searches_demo import run_searches_demo

        try:
            summary = run_searches_demo(output or Path("floodmark-searches"), searches_config(seed), console)
        except (FileExistsError, ValueError) as error:
            raise _fail(str(error), 2) from None
        console.print()
        console.print(summary, highlight=False)
        if "DIFFER" in summary:
            raise _fail("the join or the timers differ from the straight computation")
        return
    if scenario == "games":
        if kafka:
            raise typer.BadParameter("--kafka runs the clickstream scenario only", param_hint="--kafka")
        from floodmark.apps.games_demo import demo_config, run_games_demo

        try:
            summary = run_games_demo(output or Path("floodmark-games"), demo_config(seed), console)
        except (FileExistsError, ValueError) as error:
            raise _fail(str(error), 2) from None
        console.print()
        console.print(summary, highlight=False)
        if "DIFFER" in summary:
            raise _fail("a run's means differ from the straight computation")
        return
    output = output or Path("floodmark-demo")

    from floodmark.simulator.clickstream import ClickstreamConfig

    simulator = dataclasses.replace(ClickstreamConfig.demo(), seed=seed)
    if kafka:
        from floodmark.apps.kafka_demo import broker_class
        from floodmark.apps.kafka_demo import run_kafka_demo as run

        try:
            broker_class()  # the broker is a development tool (devtools/floodmark_dev), not in the wheel
        except ImportError as error:
            raise _fail(str(error), 2) from None
    else:
        from floodmark.apps.demo import run_demo as run
    try:
        result = run(output, simulator, ticks_per_second=ticks_per_second, live=live, console=console)
    except (FileExistsError, FileNotFoundError, ValueError) as error:  # output unusable; no broker jars
        raise _fail(str(error), 2) from None
    console.print()
    console.print(result.summary)
    if "counts: exact" not in result.summary:
        raise _fail("the demo's counts do not match a straight count of the simulator's records")


def _job_of(checkpoint: Path):  # -> JobDefinition (imported where used: the command line imports fast)
    """The job definition in ``checkpoint`` (or in a replay's ``<output>/checkpoint``), for ``--like``."""
    from floodmark.driver.checkpoint_files import LocalFiles
    from floodmark.driver.definition import JobDefinition, definition_path

    for candidate in (checkpoint, checkpoint / "checkpoint"):
        if Path(definition_path(str(candidate))).exists():
            try:
                return JobDefinition.read(LocalFiles(), str(candidate))
            except (ValueError, KeyError) as error:
                raise typer.BadParameter(str(error), param_hint="--like") from None
    raise typer.BadParameter(
        f"{checkpoint} holds no job definition (floodmark/definition.json): give a query's checkpoint",
        param_hint="--like",
    )


def _in_zone(job, time_zone: str):  # JobDefinition -> JobDefinition
    """``job`` with ``time_zone`` for its sources' event-time text without an offset (``--time-zone``)."""
    import dataclasses

    sources = {name: dataclasses.replace(source, time_zone=time_zone) for name, source in job.sources.items()}
    return dataclasses.replace(job, sources=sources)


def _pipeline(
    config: Path | None,
    event_time: str | None,
    key_by: str | None,
    split: str | None,
    window: str | None,
    bound: str | None,
    idleness: str | None,
    allowed_lateness: str | None,
    aggregate: list[str] | None,
    time_zone: str | None = None,
) -> PipelineConfig:
    data: dict = {}
    if config is not None:
        try:
            data = PipelineConfig.from_file(config).model_dump()
        except FileNotFoundError:
            raise typer.BadParameter(f"{config} does not exist", param_hint="--config") from None
        except (ValueError, ValidationError) as error:
            raise typer.BadParameter(_validation_text(error), param_hint="--config") from None
    if event_time:
        data["event_time"] = event_time
    if key_by:
        data["key_by"] = [k.strip() for k in key_by.split(",") if k.strip()]
    if split:
        data["split"] = split
    if window:
        data["window"] = {"kind": "tumbling", "size": _duration(window, "--window")}
    if bound:
        data["out_of_orderness"] = _duration(bound, "--bound")
    if idleness:
        data["idleness"] = _duration(idleness, "--idleness")
    if allowed_lateness:
        data["allowed_lateness"] = _duration(allowed_lateness, "--allowed-lateness")
    if aggregate:
        pairs = {}
        for item in aggregate:
            name, sep, spec = item.partition("=")
            if not sep or not name:
                raise typer.BadParameter(f"{item!r}: use name=count or name=sum:field", param_hint="--aggregate")
            pairs[name] = spec
        data["aggregations"] = pairs
    if time_zone:
        data["time_zone"] = time_zone
    data.setdefault("window", WindowConfig(kind="tumbling", size=60_000).model_dump())
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as error:
        raise typer.BadParameter(_validation_text(error)) from None


def _validation_text(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in error.errors())
    return str(error)


@app.command()
def replay(
    input_path: Annotated[
        Path, typer.Argument(help="A JSON-lines or Parquet file, or a folder of them (partition folders included).")
    ],
    output: Annotated[Path, typer.Option(help="Directory for panes, late and bad records.")] = Path("floodmark-replay"),
    config: Annotated[Path | None, typer.Option(help="Pipeline file (.json or .toml); options override it.")] = None,
    event_time: Annotated[str | None, typer.Option(help="Event-time column (ms, timestamp or text).")] = None,
    key_by: Annotated[str | None, typer.Option(help="Key columns, comma-separated.")] = None,
    split: Annotated[str | None, typer.Option(help="Split column (Kafka's partition); default one split.")] = None,
    window: Annotated[str | None, typer.Option(help="Tumbling window size, e.g. 1m.")] = None,
    bound: Annotated[str | None, typer.Option(help="Out-of-orderness bound, e.g. 50s.")] = None,
    idleness: Annotated[str | None, typer.Option(help="Idleness timeout, e.g. 30s.")] = None,
    allowed_lateness: Annotated[str | None, typer.Option(help="Allowed lateness, e.g. 5m.")] = None,
    aggregate: Annotated[
        list[str] | None, typer.Option(help="name=count | name=sum:field | min/max/mean (repeatable).")
    ] = None,
    file_format: Annotated[str | None, typer.Option("--format", help="json or parquet (default: from names).")] = None,
    files_per_batch: Annotated[int, typer.Option(min=1, help="Files per micro-batch.")] = 1,
    order: Annotated[
        str, typer.Option(help="path (default), name (file name, then path) or modified (modification time).")
    ] = "path",
    like: Annotated[
        Path | None, typer.Option(help="Run the job of this checkpoint (any job, defined in Python too) instead.")
    ] = None,
    time_zone: Annotated[
        str | None,
        typer.Option(
            help="Zone of event-time text without an offset (and of TIMESTAMP_NTZ values), e.g. Europe/Berlin. "
            "Given, it wins over the pipeline file's time_zone and the --like job's; else theirs; else UTC."
        ),
    ] = None,
) -> None:
    """Replay history (files) through a pipeline as a bounded run, in path order whatever the files' modification
    times (or --order); every window fires at the end."""
    from floodmark.apps.replay import run_replay
    from floodmark.driver.definition import JobDefinition
    from floodmark.protocol.files import FORMATS, ORDERS, detect_format, list_files

    pipeline: PipelineConfig | JobDefinition
    if like is not None:
        given = [config, event_time, key_by, split, window, bound, idleness, allowed_lateness, aggregate]
        if any(option is not None for option in given):
            raise typer.BadParameter("give either --like or a pipeline (--config and its options)", param_hint="--like")
        pipeline = _job_of(like)
        if time_zone:
            pipeline = _in_zone(pipeline, time_zone)
    else:
        pipeline = _pipeline(
            config, event_time, key_by, split, window, bound, idleness, allowed_lateness, aggregate, time_zone
        )
    if file_format is not None and file_format not in FORMATS:
        raise typer.BadParameter(f"{file_format!r}: use one of {', '.join(FORMATS)}", param_hint="--format")
    if order not in ORDERS:
        raise typer.BadParameter(f"{order!r}: use one of {', '.join(ORDERS)}", param_hint="--order")
    try:
        fmt = file_format or detect_format(input_path)
        files = list_files(input_path, fmt, order)  # type: ignore[arg-type]
    except (FileNotFoundError, ValueError) as error:
        raise _fail(str(error), 2) from None
    console.print(
        f"reading {len(files):,} {fmt} file(s) in {order} order, {files_per_batch} per batch: "
        f"{files[0]}{f' ... {files[-1]}' if len(files) > 1 else ''}",
        soft_wrap=True,
        highlight=False,
    )
    with Progress(
        TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("records", total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            result = run_replay(input_path, pipeline, output, fmt, files_per_batch, order, on_progress=update)  # type: ignore[arg-type]
        except (FileNotFoundError, ValueError) as error:  # FileNotFoundError: the input gone since it was listed
            raise _fail(str(error)) from None
    _say(
        f"replayed {result.records:,} rows in {result.batches} batches ({result.seconds:.1f} s): "
        f"{len(result.panes):,} panes, {len(result.late):,} late, {len(result.dead_letter):,} dead letters; "
        f"results in {output} (results.txt, panes/, late/, dead_letter/)"
    )
    _say(f"reconciliation: {result.reconciliation.describe()}")


@app.command()
def explain(
    run: Annotated[
        Path,
        typer.Argument(help="A query's checkpoint, the output directory of floodmark demo or replay, or a games run."),
    ],
    window_start: Annotated[
        str | None, typer.Option(help="Window start: ISO date-time (UTC) or ms, e.g. 2026-01-01T00:05.")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="The key, comma-separated in key_by order, e.g. a,CLICK (none: unkeyed).")
    ] = None,
    stage: Annotated[str | None, typer.Option(help="The stage (default: the only one), e.g. means.")] = None,
    batch: Annotated[int | None, typer.Option(min=0, help="Explain as of this batch (default: the last).")] = None,
    window_end: Annotated[
        str | None, typer.Option(help="Window end, for cumulate windows (they share starts), e.g. 2026-01-01T10:00.")
    ] = None,
    time: Annotated[
        str | None,
        typer.Option(help="For a join or a process stage: the event time of a row or timer, e.g. 2026-01-01T00:05."),
    ] = None,
    side: Annotated[str | None, typer.Option(help="For a join: the row's side, left or right.")] = None,
    changes: Annotated[
        Path | None,
        typer.Option(
            help="A changed job definition (a copy of <checkpoint>/floodmark/definition.json, JSON or TOML): say "
            "which changes a restart on the checkpoint keeps and which it refuses. Exit code 1: one is refused."
        ),
    ] = None,
) -> None:
    """Say why a key's window has not fired (a window stage, or a window join's pairs): which split or upstream stage
    holds the watermark back, idleness, when it fires. For an interval join or a process stage (--time): a row's
    partners and cleanup, or a timer. With --changes: which settings of a changed job keep the checkpoint's state."""
    from floodmark.apps.inspection import explain_changes, explain_run, explain_time_run

    if changes is not None:
        try:
            said = explain_changes(run, changes)
        except (FileNotFoundError, ValueError) as error:
            raise _fail(str(error), 2) from None
        console.print(said.text(), highlight=False, markup=False, soft_wrap=True)
        if said.refused:
            raise typer.Exit(1)
        return
    if (window_start is None) == (time is None):
        raise _fail(
            "give --window-start (a window stage or a window join), --time (an interval join or a process stage) or "
            "--changes",
            2,
        )
    if time is not None:
        try:
            answer = explain_time_run(run, _parsed(parse_instant, time, "--time"), side, batch, stage)
        except (FileNotFoundError, LookupError, ValueError) as error:
            raise _fail(str(error), 2) from None
        console.print(answer.text(), highlight=False, markup=False, soft_wrap=True)
        return
    assert window_start is not None
    start = _parsed(parse_instant, window_start, "--window-start")
    end = None if window_end is None else _parsed(parse_instant, window_end, "--window-end")
    parts = () if key is None else tuple(part.strip() for part in key.split(","))
    try:
        result = explain_run(run, parts, start, batch, stage, end)
    except (FileNotFoundError, LookupError, ValueError) as error:
        raise _fail(str(error), 2) from None
    console.print(result.text(), highlight=False, markup=False, soft_wrap=True)  # the terminal wraps, not rich at 80


@app.command()
def advise(
    input_path: Annotated[
        Path, typer.Argument(help="Records (JSON lines or Parquet, partition folders included) in arrival order.")
    ],
    event_time: Annotated[str, typer.Option(help="Event-time column (ms, timestamp or ISO text).")] = "ts",
    split: Annotated[str | None, typer.Option(help="Split column (or partition folder); default one split.")] = None,
    target: Annotated[float, typer.Option(min=0.0, max=1.0, help="Target fraction of late records.")] = 0.01,
    window: Annotated[str | None, typer.Option(help="Window size, e.g. 1m (for the state estimate).")] = None,
    time_zone: Annotated[str, typer.Option(help="Zone of event-time text without an offset.")] = "UTC",
    join: Annotated[
        Path | None,
        typer.Option(help="The right input of an interval join (INPUT_PATH is the left): propose its bounds instead."),
    ] = None,
    on: Annotated[str | None, typer.Option(help="With --join: the key column both inputs are joined on.")] = None,
    per: Annotated[
        str,
        typer.Option(
            help="With --join: the side whose rows each belong to one row of the other (a search's clicks: right)."
        ),
    ] = "right",
) -> None:
    """Recommend an out-of-orderness bound and allowed lateness from observed records, with the trade-off; with
    --join, an interval join's bounds (the share of left rows whose nearest partner each keeps).

    Lines and rows that are not records with an event time are skipped and counted (as dead letters).
    """
    from floodmark.apps.advisor import format_tradeoff, observe, read_records, recommend, tradeoff

    if join is not None:
        _advise_join(input_path, join, on, per, event_time, time_zone)
        return
    window_ms = _duration(window, "--window")
    try:
        records = read_records(input_path, event_time, split, time_zone)
    except (FileNotFoundError, ValueError) as error:
        raise _fail(str(error), 2) from None
    skipped = records.skipped_text()
    if skipped is not None:
        errors.print(f"[yellow]warning:[/] {escape(skipped)}", soft_wrap=True, highlight=False)
    profile = observe(records.splits, records.event_times)
    best = recommend(profile, target, window_size_ms=window_ms)
    _say(f"{profile.count:,} records; largest out-of-orderness {profile.max_out_of_orderness:,} ms")
    _say(
        f"for at most {target:.3%} late: bound {best.bound_ms:,} ms, allowed lateness {best.allowed_lateness_ms:,} ms "
        f"(results {best.latency_ms:,} ms later than with a perfect watermark)"
    )
    _say(format_tradeoff(tradeoff(profile, window_size_ms=window_ms)))


def _advise_join(left_path: Path, right_path: Path, on: str | None, per: str, event_time: str, time_zone: str) -> None:
    """``advise --join``: both inputs read as the advisor reads records, the key column as their split."""
    from floodmark.apps.advisor import read_records
    from floodmark.apps.join_advisor import advise_join

    if on is None:
        raise _fail("--join needs --on: the key column both inputs are joined on", 2)
    if per not in ("left", "right"):
        raise _fail(f"--per is left or right, not {per!r}", 2)
    try:
        sides = [read_records(path, event_time, on, time_zone) for path in (left_path, right_path)]
        for records in sides:
            skipped = records.skipped_text()
            if skipped is not None:
                errors.print(f"[yellow]warning:[/] {escape(skipped)}", soft_wrap=True, highlight=False)
        left, right = sides
        assert left.splits is not None and right.splits is not None  # read with a key column
        advice = advise_join(
            list(left.splits),
            left.event_times,
            list(right.splits),
            right.event_times,
            per,  # type: ignore[arg-type]
        )
    except (FileNotFoundError, ValueError) as error:
        raise _fail(str(error), 2) from None
    _say(advice.text())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
