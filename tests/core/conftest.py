"""Shared fixtures of the engine-free tests."""

from __future__ import annotations

import functools

import pytest

from floodmark.core.built_in_spec import built_in_form
from floodmark.testing import WindowHarness
from floodmark_dev.jvm_window import JvmWindowHost, classpath


@pytest.fixture(scope="session")
def jvm():
    """One JVM running floodmark's JVM window operator without Spark (``floodmark_dev.jvm_window``); tests that
    use it are skipped when floodmark's jar is not built (a source tree set up without Maven)."""
    path = classpath()
    if path is None:
        pytest.skip("floodmark's jar is not built (scripts/setup.sh needs Maven)")
    host = JvmWindowHost(path)
    yield host
    host.close()


class JvmHarness(WindowHarness):
    """A :class:`WindowHarness` whose operator is the JVM's (the spec must have a built-in form)."""

    def __init__(self, host: JvmWindowHost, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if built_in_form(self.spec) is None:
            pytest.skip("the JVM host has no built-in form of this spec: it runs on the Python host")
        self.operator = host.operator(self.spec, self.operator.watermark, self.operator.processing_time)

    def add_elements(self, elements, key=None):
        elements = list(elements)
        if any(not isinstance(ts, int | None) or isinstance(ts, bool) for _, ts in elements):
            # On the JVM host a source's event-time expression gives whole ms or null: raw values are checked
            # before the operator (the map side), not in it.
            pytest.skip("the JVM operator takes event times as whole ms or none")
        return super().add_elements(elements, key)

    def open_windows(self, key):
        return self.operator.windows_of(key)


@pytest.fixture(params=["general", "auto", "jvm"])
def both_operators(request, monkeypatch):
    """Run a harness test on every execution strategy: the general operator, what Spark's Python host runs
    (``auto``: the columnar operator when the spec has a columnar form), and the JVM host's operator (``jvm``:
    specs with a built-in form, ``floodmark.core.built_in_spec``; the others are skipped there). Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("both_operators")``; their ``WindowHarness`` is pinned to one."""
    if request.param == "jvm":
        harness = functools.partial(JvmHarness, request.getfixturevalue("jvm"))
    else:
        harness = functools.partial(WindowHarness, policy=request.param)
    monkeypatch.setattr(request.module, "WindowHarness", harness)
    return request.param
