#!/usr/bin/env python3
"""Flink oracle for floodmark: runs small event-time computations on real Apache Flink
(PyFlink from PyPI) and prints the result as ONE JSON document on stdout.

Usage (inside the venv that has apache-flink installed):
    python oracle.py cumulate INPUT.json [--auto-watermark-interval-ms N]   (default 0 = eager)
    python oracle.py interval-join INPUT.json [--pause-ms N]   (default 300; sleep before each event)
    python oracle.py window-join INPUT.json [--pause-ms N]
    python oracle.py timers INPUT.json

cumulate:       {"step_ms", "max_size_ms", "rows": [{"k","ts","v"}]}
                -> [{"k","window_start_ms","window_end_ms","n","total"}] sorted
                Flink SQL CUMULATE window TVF, streaming mode, bounded source, parallelism 1,
                rowtime = TO_TIMESTAMP_LTZ(ts, 3), WATERMARK ts_col - INTERVAL '0' SECOND,
                table.local-time-zone = UTC, pipeline.auto-watermark-interval = 0 (the watermark
                is advanced eagerly after every row = max ts seen so far, so arrival order matters
                deterministically for late rows).
interval-join:  {"lower_ms","upper_ms","events": [{"side":"L"|"R","k","ts","id","watermark_after"}]}
                -> {"pairs": [[l, r]...], "late_left": [...], "late_right": [...]}
                PyFlink's Python DataStream API has no interval_join and no Python
                WatermarkGenerator, so this subcommand builds the job with Flink's Java DataStream
                API (KeyedStream.intervalJoin -> IntervalJoinOperator) through PyFlink's py4j
                gateway, from the Java helper IntervalJoinOracle.java beside this file (compiled once with javac,
                cached in $FLINK_ORACLE_BUILD, default build/ next to this file).
window-join:    {"kind": "tumbling"|"sliding"|"sessions", "size_ms" (the gap for sessions), "slide_ms",
                "lateness_ms", "events": [as interval-join's]} -> {"pairs": [[l, r]...]} in emission order
                (a late firing emits its window's pairs again); DataStream.join(...).window(...), through the
                same Java helper.
timers:         {"gap_ms", "events": [{"k","ts","id","watermark_after"}]}
                -> [[k, count, first, last, watermark at emission]] in emission order
                A Java KeyedProcessFunction (floodmark.apps.searches.AbandonedSearches' rule) with event-time
                timers, on the same punctuated watermarks, through the same helper.
"""

import calendar
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("FLINK_ORACLE_BUILD", os.path.join(HERE, "build"))  # the compiled helper's cache

with open(os.path.join(HERE, "IntervalJoinOracle.java"), encoding="utf-8") as _source:
    JAVA_SOURCE = _source.read()
"""The interval-join job in Flink's Java DataStream API (PyFlink's Python API has no interval join)."""


def _log(*a):
    print(*a, file=sys.stderr, flush=True)


def _pyflink_dirs():
    import pyflink

    base = os.path.dirname(os.path.abspath(pyflink.__file__))
    return os.path.join(base, "lib"), os.path.join(base, "opt")


def _helper_jar():
    """Compile the embedded Java helper once (keyed by source hash + Flink version)."""
    from pyflink.version import __version__ as flink_version

    h = hashlib.sha256((flink_version + JAVA_SOURCE).encode()).hexdigest()[:12]
    jar = os.path.join(BUILD, f"oracle-ij-{h}.jar")
    if os.path.exists(jar):
        return jar
    lib, _ = _pyflink_dirs()
    src_dir = os.path.join(BUILD, "src-" + h, "oracle")
    cls_dir = os.path.join(BUILD, "classes-" + h)
    os.makedirs(src_dir, exist_ok=True)
    os.makedirs(cls_dir, exist_ok=True)
    src = os.path.join(src_dir, "IntervalJoinOracle.java")
    with open(src, "w") as f:
        f.write(JAVA_SOURCE)
    javac = os.environ.get("JAVAC", "javac")
    subprocess.run(
        [javac, "--release", "11", "-cp", os.path.join(lib, "*"), "-d", cls_dir, src], check=True, stdout=sys.stderr
    )
    tmp = jar + ".tmp"
    subprocess.run(["jar", "cf", tmp, "-C", cls_dir, "oracle"], check=True, stdout=sys.stderr)
    os.replace(tmp, jar)
    return jar


def _ms_from_naive_utc(dt):
    return calendar.timegm(dt.timetuple()) * 1000 + dt.microsecond // 1000


def run_cumulate(inp, auto_wm_ms=0):
    from pyflink.common import Configuration, Row
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, Schema, StreamTableEnvironment

    conf = Configuration()
    conf.set_string("pipeline.auto-watermark-interval", f"{auto_wm_ms} ms")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(env, EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("table.local-time-zone", "UTC")
    t_env.get_config().set("pipeline.auto-watermark-interval", f"{auto_wm_ms} ms")
    t_env.get_config().set("parallelism.default", "1")

    rows = [Row(str(r["k"]), int(r["ts"]), float(r["v"])) for r in inp["rows"]]
    ti = Types.ROW_NAMED(["k", "ts", "v"], [Types.STRING(), Types.LONG(), Types.DOUBLE()])
    ds = env.from_collection(rows, type_info=ti)
    schema = (
        Schema.new_builder()
        .column("k", "STRING")
        .column("ts", "BIGINT")
        .column("v", "DOUBLE")
        .column_by_expression("ts_col", "TO_TIMESTAMP_LTZ(ts, 3)")
        .watermark("ts_col", "ts_col - INTERVAL '0' SECOND")
        .build()
    )
    t_env.create_temporary_view("t", t_env.from_data_stream(ds, schema))
    step, size = int(inp["step_ms"]), int(inp["max_size_ms"])

    # INTERVAL 'n' SECOND(p, 3) keeps millisecond precision
    def iv(ms):
        return f"INTERVAL '{ms // 1000}.{ms % 1000:03d}' SECOND(9, 3)"

    sql = (
        "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total "
        f"FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts_col), {iv(step)}, {iv(size)})) "
        "GROUP BY k, window_start, window_end"
    )
    _log("SQL:", sql)
    out = []
    with t_env.execute_sql(sql).collect() as results:
        for r in results:
            out.append(
                {
                    "k": r[0],
                    "window_start_ms": _ms_from_naive_utc(r[1]),
                    "window_end_ms": _ms_from_naive_utc(r[2]),
                    "n": int(r[3]),
                    "total": float(r[4]),
                }
            )
    out.sort(key=lambda d: (d["k"], d["window_start_ms"], d["window_end_ms"]))
    return out


def _java_helper():
    """A stream environment with the Java helper's jar, and the gateway's JVM (its classes under ``jvm.oracle``)."""
    jar = _helper_jar()
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_jars("file://" + jar)  # also puts the jar on the gateway's context class loader
    return env, get_gateway().jvm


def run_interval_join(inp, pause_ms):
    env, jvm = _java_helper()
    for e in inp["events"]:
        if e["side"] not in ("L", "R"):
            raise ValueError(f"side must be L or R: {e!r}")
    res = jvm.oracle.IntervalJoinOracle.run(
        env._j_stream_execution_environment,
        _event_lines(inp["events"], lambda e: e["side"]),
        int(inp["lower_ms"]),
        int(inp["upper_ms"]),
        int(pause_ms),
    )
    pairs, late_l, late_r = [], [], []
    for s in list(res):
        f = str(s).split("\t")
        if f[0] == "P":
            pairs.append([f[1], f[2]])
        elif f[0] == "LL":
            late_l.append(f[1])
        elif f[0] == "LR":
            late_r.append(f[1])
    # emission order is kept for pairs; late lists in arrival order
    return {"pairs": pairs, "late_left": late_l, "late_right": late_r}


def run_window_join(inp, pause_ms):
    env, jvm = _java_helper()
    res = jvm.oracle.IntervalJoinOracle.runWindowJoin(
        env._j_stream_execution_environment,
        _event_lines(inp["events"], lambda e: e["side"]),
        str(inp["kind"]),
        int(inp["size_ms"]),
        int(inp.get("slide_ms", 0)),
        int(inp.get("lateness_ms", 0)),
        int(pause_ms),
    )
    return {"pairs": [str(s).split("\t")[1:3] for s in list(res)]}


def _event_lines(events, side_of):
    lines = []
    for e in events:
        wm = e.get("watermark_after")
        for s in (str(e["k"]), str(e["id"])):
            if "\t" in s or "\n" in s:
                raise ValueError("tabs/newlines not allowed in k/id")
        lines.append(
            "\t".join([side_of(e), str(e["k"]), str(int(e["ts"])), str(e["id"]), "" if wm is None else str(int(wm))])
        )
    return "\n".join(lines)


def run_timers(inp):
    env, jvm = _java_helper()
    lines = _event_lines(inp["events"], lambda e: "L")
    res = jvm.oracle.IntervalJoinOracle.runTimers(env._j_stream_execution_environment, lines, int(inp["gap_ms"]))
    out = []
    for s in list(res):
        f = str(s).split("\t")
        out.append([f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5])])
    return out


def main(argv):
    if len(argv) < 3 or argv[1] not in ("cumulate", "interval-join", "window-join", "timers"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, path = argv[1], argv[2]
    pause_ms = 300
    if "--pause-ms" in argv:
        pause_ms = int(argv[argv.index("--pause-ms") + 1])
    auto_wm_ms = 0
    if "--auto-watermark-interval-ms" in argv:
        auto_wm_ms = int(argv[argv.index("--auto-watermark-interval-ms") + 1])
    with open(path) as f:
        inp = json.load(f)
    # Keep stdout clean: route fd 1 (and children, e.g. the JVM) to stderr while Flink runs.
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    t0 = time.time()
    try:
        if cmd == "cumulate":
            result = run_cumulate(inp, auto_wm_ms)
        elif cmd == "timers":
            result = run_timers(inp)
        elif cmd == "window-join":
            result = run_window_join(inp, pause_ms)
        else:
            result = run_interval_join(inp, pause_ms)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.close(real_stdout)
    _log(f"oracle {cmd} took {time.time() - t0:.1f}s")
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
