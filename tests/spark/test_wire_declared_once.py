"""The carrier protocol is declared once, in Python (``floodmark.protocol.wire`` and ``output``); the JVM host reads
its names from the level plan (``floodmark.host.Wire``). Seconds, no Spark: a rename on either side fails here, not in
a minutes-long run of the JVM host."""

from __future__ import annotations

import re
from pathlib import Path

from floodmark.protocol import output, wire
from floodmark.spark.stateful.jvm_level import wire_names

SCALA = Path(__file__).resolve().parents[2] / "jvm" / "floodmark" / "src" / "main" / "scala" / "floodmark"
WIRE = SCALA / "host" / "Wire.scala"
NOT_HOST = {"Wire.scala", "PythonJsonMain.scala"}
HOST = [*(p for p in sorted((SCALA / "host").glob("*.scala")) if p.name not in NOT_HOST)]
HOST += [SCALA / "batch" / "ControlEntry.scala", SCALA / "unpack" / "UnpackBlock.scala"]
"""The JVM host's sources that read or write carrier rows (``PythonJsonMain`` is a test driver; ``Wire.scala`` is the
one place the names are looked up)."""


def code_lines(path: Path) -> list[tuple[int, str]]:
    """``path``'s lines that are code (not a comment line)."""
    lines = enumerate(path.read_text().splitlines(), 1)
    return [(n, line) for n, line in lines if not line.strip().startswith(("*", "//", "/**"))]


def test_the_jvm_host_restates_no_name_of_the_protocol():
    """No string literal in the JVM host is one of the protocol's names (``"fm_stage"``, ``"PANE"``,
    ``"window_start"``, ...): each comes from the plan's wire."""
    declared = {v for module in (wire, output) for k, v in vars(module).items() if k.isupper() and isinstance(v, str)}
    restated = [
        f"{path.name}:{n}: {literal!r}"
        for path in HOST
        for n, line in code_lines(path)
        for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', line)
        if literal in declared and len(literal) > 1
    ]
    assert not restated, "the JVM host restates the protocol's names; read them from plan.wire:\n" + "\n".join(restated)


def test_every_name_the_jvm_host_reads_is_declared_and_sent():
    """Each name ``Wire.scala`` looks up is a constant of ``wire.py`` (``c(...)``, ``letter(...)``) or ``output.py``
    (``o(...)``), and the level plan sends it; the combiner's row kinds are one letter each (compared as chars)."""
    text = WIRE.read_text()
    carrier = set(re.findall(r'\b(?:c|letter)\("([A-Z_]+)"\)', text))
    emitted = set(re.findall(r'\bo\("([A-Z_]+)"\)', text))
    assert carrier and emitted
    sent = wire_names()
    assert carrier <= set(sent["carrier"]), carrier - set(sent["carrier"])
    assert emitted <= set(sent["emitted"]), emitted - set(sent["emitted"])
    assert sent["gauges"] == list(wire.GAUGES)
    for name in re.findall(r'\bletter\("([A-Z_]+)"\)', text):
        assert len(getattr(wire, name)) == 1, name
