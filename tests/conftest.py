"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pathrag_lab.testing.openai_server import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A started OpenAI-compatible server on 127.0.0.1 (free port), stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh PATHRAG_HOME under the test's tmp_path, set in the environment the CLI reads."""
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's PATHRAG_* or OpenAI settings, so nothing reaches a real endpoint."""
    import os

    for name in list(os.environ):
        if name.startswith("PATHRAG_") or name.startswith("OPENAI_"):
            monkeypatch.delenv(name, raising=False)
    # no command leaves a query service behind (cli/background_service.py), even under `pytest -s` at a terminal
    monkeypatch.setenv("PATHRAG_AUTO_SERVE", "never")


@pytest.fixture(autouse=True)
def _signal_dispositions_put_back() -> Iterator[None]:
    """Every test leaves SIGINT and SIGTERM as it found them. A Dagster run in this process makes SIGTERM do what
    SIGINT does and leaves it so; under a runner started with SIGINT ignored (a background job) SIGTERM then stays
    ignored, spawned children inherit that, and a process pool that ends its workers with SIGTERM waits forever."""
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
