"""The query service a command starts in the background for the next ones (cli/background_service.py, issue 64):
when it starts (PATHRAG_AUTO_SERVE), that only one starts, that it stops by itself when idle, on `pathrag serve
--stop`, and when a later command finds it runs with other settings, keys or code; and that a client never uses a
service holding other keys (a digest keyed by the token tells, never the key)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import background_service, main
from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.query import service_client
from pathrag_pipeline.query.service import serve, wait_ready
from pathrag_pipeline.query.service_client import ServiceInfo, ServiceUnavailable, differences, live_service
from tests.query_fixtures import tiny_index_home

QUESTION = "Who founded Aldermere University?"


@pytest.fixture
def settings(tmp_path, monkeypatch):
    return tiny_index_home(tmp_path, monkeypatch)


def serve_in_thread(settings: Settings, **kwargs):
    lines: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(settings,), kwargs={"log": lines.append, "stop": stop, **kwargs},
                              daemon=True)
    thread.start()
    info = wait_ready(settings.home)
    return thread, stop, info, lines


@pytest.mark.parametrize(("raw", "value"), [(None, "terminal"), ("", "terminal"), ("always", "always"),
                                            ("1", "always"), ("ON", "always"), ("never", "never"), ("0", "never"),
                                            ("off", "never"), (" Terminal ", "terminal")])
def test_the_setting_reads_its_values(raw, value):
    env = {} if raw is None else {"PATHRAG_AUTO_SERVE": raw}
    assert Settings.from_env(env=env).auto_serve == value


def test_a_wrong_value_names_the_variable_and_the_choices():
    with pytest.raises(ConfigError, match=r"PATHRAG_AUTO_SERVE='sometimes' is not one of terminal, always, never"):
        Settings.from_env(env={"PATHRAG_AUTO_SERVE": "sometimes"})


def test_only_a_terminal_starts_one_by_default(monkeypatch, tmp_path):
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

        def write(self, text: str) -> int:
            return len(text)

    base = Settings.from_env(env={}, home=tmp_path)
    for stderr, mode, expected in [(True, "terminal", True), (False, "terminal", False), (False, "always", True),
                                   (True, "never", False)]:
        monkeypatch.setattr("sys.stderr", Tty(stderr))
        assert background_service.wanted(Settings.from_env(env={"PATHRAG_AUTO_SERVE": mode}, home=tmp_path)) \
            is expected, (stderr, mode)
    assert base.auto_serve == "terminal"


def test_a_client_with_another_key_does_not_use_the_service_and_the_key_is_never_shown(tmp_path):
    token = "t" * 43
    held = Settings.from_env(env={"PATHRAG_LLM_API_KEY": "sk-held-secret"}, home=tmp_path)
    info = ServiceInfo("http://127.0.0.1:9", token, "h:1:1", held.public(), "", held.secrets_digest(token),
                       service_client.code_version())
    assert differences(info, held, []) == []
    other = Settings.from_env(env={"PATHRAG_LLM_API_KEY": "sk-other-secret"}, home=tmp_path)
    differ = differences(info, other, [])
    assert differ == [f"a secret ({service_client.SECRET_NAMES})"]
    assert held.public() == other.public()   # what the settings comparison alone saw: both "set"
    assert "sk-" not in info.to_json() and "sk-" not in " ".join(differ)
    assert held.secrets_digest("another token") != held.secrets_digest(token)   # keyed: useless elsewhere
    stale = ServiceInfo(info.url, token, info.process, info.settings, "", info.secrets, "0.0.0:1")
    assert differences(stale, held, []) == ["the code (pathrag was updated or edited since it started)"]


def test_the_code_version_moves_when_a_module_is_edited(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "mod.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "notes.txt").write_text("not code\n")
    before = service_client.code_version((tmp_path / "pkg",))
    later = time.time() + 100
    os.utime(tmp_path / "pkg" / "notes.txt", (later, later))
    assert service_client.code_version((tmp_path / "pkg",)) == before   # only Python files count
    os.utime(tmp_path / "pkg" / "sub" / "mod.py", (later, later))
    assert service_client.code_version((tmp_path / "pkg",)) != before
    assert service_client.code_version() == service_client.code_version()   # the installed package's is stable


def test_an_idle_service_stops_by_itself_and_a_request_keeps_it_up(settings):
    thread, stop, info, lines = serve_in_thread(settings, idle_exit=1.5)
    try:
        for _ in range(4):   # requests 0.5 s apart: never 1.5 s idle
            service_client.call(info, "/health")
            time.sleep(0.5)
        assert thread.is_alive()
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert "no request for 1.5 s: stopping" in lines
        assert live_service(settings.home) is None
    finally:
        stop.set()


def test_health_says_when_the_indexer_has_warmed_up_and_wait_ready_can_wait_for_it(settings):
    release = threading.Event()

    class SlowIndexer:
        def warm(self) -> None:
            release.wait(30)

        def __call__(self, request):
            return {"printed": "", "unembedded": 0}

    thread, stop, info, lines = serve_in_thread(settings, indexer=SlowIndexer())
    try:
        assert service_client.call(info, "/health")["indexer_warm"] is False
        with pytest.raises(TimeoutError, match="no query service came up warm"):
            wait_ready(settings.home, timeout=0.5, warm=True)
        release.set()
        assert wait_ready(settings.home, timeout=30, warm=True) == info
        assert service_client.call(info, "/health")["indexer_warm"] is True
    finally:
        release.set()
        stop.set()
        thread.join(timeout=30)


def test_serve_stop_stops_the_running_service(settings):
    thread, stop, info, lines = serve_in_thread(settings)
    try:
        res = CliRunner().invoke(main, ["serve", "--stop"])
        assert res.exit_code == 0, res.output
        assert f"query service at {info.url} stopped" in res.stderr
        thread.join(timeout=30)
        assert not thread.is_alive() and "asked to stop (POST /stop)" in lines
    finally:
        stop.set()
    res = CliRunner().invoke(main, ["serve", "--stop"])
    assert res.exit_code == 1 and "no query service runs for" in res.stderr


def test_a_background_service_that_differs_is_asked_to_stop_and_a_started_one_is_not(settings, monkeypatch):
    for background in (False, True):
        thread, stop, info, lines = serve_in_thread(Settings.from_env(), background=background)
        try:
            assert service_client.read_info(settings.home).background is background
            other = Settings.from_env(env={**os.environ, "PATHRAG_DUCKDB_MEMORY_LIMIT": "1GB"})
            with pytest.raises(ServiceUnavailable, match=r"other settings \(PATHRAG_DUCKDB_MEMORY_LIMIT\)") as err:
                service_client.ask(other, QUESTION, "path", {})
            assert ("asked it to stop" in str(err.value)) is background
            thread.join(timeout=30 if background else 2)
            assert thread.is_alive() is not background   # the one `pathrag serve` started is the user's to stop
        finally:
            stop.set()
            thread.join(timeout=30)


def test_a_command_starts_one_service_for_the_next_and_it_answers_them(settings, monkeypatch):
    monkeypatch.setenv("PATHRAG_AUTO_SERVE", "always")
    pid = None
    try:
        res = CliRunner().invoke(main, ["ask", QUESTION])
        assert res.exit_code == 0, res.output
        assert "answered by the query service" not in res.stdout
        assert "started a query service for this home in the background (pid " in res.stderr
        pid = int(res.stderr.split("(pid ", 1)[1].split(",", 1)[0])
        # a second command while it starts does not start another
        assert background_service.start_for_next_command(Settings.from_env()) is None
        info = wait_ready(settings.home, timeout=120, warm=True)
        assert info.background and info.process.split(":")[1] == str(pid)
        assert service_client.call(info, "/health")["indexer_warm"] is True
        assert not background_service.starting_file(settings.home).exists()
        res = CliRunner().invoke(main, ["ask", QUESTION])
        assert res.exit_code == 0 and "answered by the query service" in res.stdout, res.output
        assert "started a query service" not in res.stderr
        log = (settings.home / background_service.LOG_FILE).read_text()
        assert "Started in the background; it stops after 900 s without a request." in log
        assert "sk-" not in log and QUESTION not in log
        res = CliRunner().invoke(main, ["serve", "--stop"])
        assert res.exit_code == 0, res.output
        pid = None
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)


def test_never_and_local_start_none(settings, monkeypatch):
    monkeypatch.setenv("PATHRAG_AUTO_SERVE", "never")
    res = CliRunner().invoke(main, ["ask", QUESTION])
    assert res.exit_code == 0 and "started a query service" not in res.stderr, res.output
    monkeypatch.setenv("PATHRAG_AUTO_SERVE", "always")
    res = CliRunner().invoke(main, ["ask", QUESTION, "--local"])
    assert res.exit_code == 0 and "started a query service" not in res.stderr, res.output
    assert not background_service.starting_file(settings.home).exists()
    assert live_service(settings.home) is None


def test_a_start_under_way_or_just_failed_blocks_another_until_its_marker_is_old(settings):
    marker = background_service.starting_file(settings.home)
    assert not background_service.start_under_way(settings.home)
    marker.write_text(f"{os.uname().nodename}:999999999:1")   # its process is gone: a failed start, not retried yet
    assert background_service.start_under_way(settings.home)
    assert background_service.start_for_next_command(
        Settings.from_env(env={**os.environ, "PATHRAG_AUTO_SERVE": "always"})) is None
    old = time.time() - background_service.STARTING_FOR_S - 5
    os.utime(marker, (old, old))
    assert not background_service.start_under_way(settings.home)


def test_a_stopping_service_answers_the_run_in_hand_first(settings):
    """Asked to stop (a client that differs, `serve --stop`) while another client's index run is in hand, the
    service replies to that client before it ends: a dropped connection would make it index again itself."""
    release, entered = threading.Event(), threading.Event()

    class BusyIndexer:
        def warm(self) -> None:
            pass

        def __call__(self, request):
            entered.set()
            release.wait(30)
            return {"printed": "indexed\n", "unembedded": 0}

    thread, stop, info, lines = serve_in_thread(settings, indexer=BusyIndexer())
    replies = []
    client = threading.Thread(target=lambda: replies.append(service_client.call(info, "/index", {"folder": "x"})))
    client.start()
    try:
        assert entered.wait(30)
        service_client.call(info, "/stop", {})
        thread.join(timeout=1.5)
        assert thread.is_alive()   # waiting for the run in hand
        release.set()
        client.join(timeout=30)
        thread.join(timeout=30)
        assert replies == [{"printed": "indexed\n", "unembedded": 0}] and not thread.is_alive()
    finally:
        release.set()
        stop.set()
        thread.join(timeout=30)
