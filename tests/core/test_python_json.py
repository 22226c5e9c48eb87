"""The JVM host's Python text rules (``floodmark.host.PythonJson`` in floodmark's jar) against Python itself.

A late record's or dead letter's ``record`` is JSON text that the Python host writes with ``json.dumps`` (floats
by ``repr``, ``ensure_ascii``, NaN as null: ``floodmark.core.values.plain``), and a reason quotes raw text with
``repr``: the JVM host writes the same text by those rules. Random doubles (any bit pattern) and strings (any
code point) go through both; the answers must be equal to the character. Runs a plain JVM, no Spark.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.core.values import plain
from floodmark.jvm import java_executable, packaged_jars


@pytest.fixture(scope="module")
def python_json():
    jars = packaged_jars()
    found = importlib.util.find_spec("pyspark")
    if not jars or found is None or found.origin is None:
        pytest.skip("floodmark's jar is not built (scripts/setup.sh needs Maven)")
    path = ":".join([*map(str, jars), str(Path(found.origin).parent / "jars" / "*")])
    process = subprocess.Popen(
        [java_executable(), "-cp", path, "floodmark.host.PythonJsonMain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )

    def ask(command: dict) -> dict:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(command) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    yield ask
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


EDGES = [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 0.1, 5e-324, 1.7976931348623157e308, 2.5e-7, 1e22]


@settings(max_examples=2_000, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGES)))
def test_doubles_are_written_as_python_writes_them(python_json, value):
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    assert python_json({"double_bits": bits})["json"] == json.dumps(plain(value))


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cn"]), max_size=12)
"""Any text but lone surrogates (not UTF-8) and unassigned characters (``PythonJson.repr`` prints those that the
JVM's older Unicode tables leave unassigned and Python's assign; Python escapes the ones it does not know)."""


@settings(max_examples=1_000, deadline=None)
@given(
    st.one_of(TEXT, st.sampled_from(["", "'", '"', "'\"", "a'b", "\x7f\x80\xa0\xad", "\u2028\u3000日本", "\U0001f600"]))
)
def test_text_is_quoted_and_escaped_as_python_does(python_json, text):
    answer = python_json({"text": text})
    assert answer["repr"] == repr(text)
    assert answer["json"] == json.dumps(text)
