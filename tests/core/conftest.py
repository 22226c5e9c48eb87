"""Shared fixtures of the engine-free tests."""

from __future__ import annotations

import functools

import pytest

from floodmark.testing import WindowHarness


@pytest.fixture(params=["general", "auto"])
def both_operators(request, monkeypatch):
    """Run a harness test on both execution strategies: the general operator, and what Spark would run
    (``auto``: the columnar operator when the spec has a columnar form). Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("both_operators")``; their ``WindowHarness`` is pinned to one."""
    monkeypatch.setattr(request.module, "WindowHarness", functools.partial(WindowHarness, policy=request.param))
    return request.param
