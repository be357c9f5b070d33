"""The query service (`pathrag serve`, query/service.py): `pathrag ask` hands its question to it when it runs for the
home with the same settings, gets the same answer a local ask gives, sees re-indexed graphs, and falls back to
answering itself (one line) when the service is gone or configured differently. Issue 22, item 6."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import Settings
from pathrag_pipeline.query.service import serve, wait_ready
from pathrag_pipeline.query.service_client import (
    ServiceError,
    ServiceInfo,
    call,
    read_info,
    service_file,
    write_info,
)
from pathrag_pipeline.storage.store import Store, transaction
from tests.query_fixtures import tiny_index_home

QUESTION = "Who founded Aldermere University?"


@pytest.fixture
def settings(tmp_path, monkeypatch):
    return tiny_index_home(tmp_path, monkeypatch)


@pytest.fixture
def service(settings):
    """`serve` for the tiny index in a thread of this process; stopped (and its file removed) after the test."""
    stop = threading.Event()
    lines: list[str] = []
    thread = threading.Thread(target=serve, args=(Settings.from_env(),),
                              kwargs={"stop": stop, "log": lines.append}, daemon=True)
    thread.start()
    info = wait_ready(settings.home)
    yield info, lines
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()


def answered(info: ServiceInfo) -> int:
    return call(info, "/health")["answered"]


def ask(*args: str) -> tuple[int, dict | None, str]:
    res = CliRunner().invoke(main, ["ask", *args, "--json"])
    out = res.stdout
    return res.exit_code, (json.loads(out) if res.exit_code == 0 else None), res.stderr


def logged_ids(settings) -> set[str]:
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return {r[0] for r in con.execute("SELECT query_id FROM queries").fetchall()}


def test_ask_goes_through_the_service_gives_the_local_answer_and_is_logged(settings, service):
    info, lines = service
    before = answered(info)
    code, served, err = ask(QUESTION)
    assert code == 0, err
    assert answered(info) == before + 1
    code, local, err = ask(QUESTION, "--local")
    assert code == 0, err
    assert answered(info) == before + 1   # --local never reached the service
    for key in ("answer", "paths", "chunk_ids", "document_ids", "keywords", "params"):
        assert served[key] == local[key], key
    assert {served["query_id"], local["query_id"]} <= logged_ids(settings)
    assert any(served["query_id"] in line for line in lines)
    assert not any(QUESTION in line for line in lines)   # the service's log names queries, not their text


def test_people_see_that_the_service_answered(settings, service):
    res = CliRunner().invoke(main, ["ask", QUESTION])
    assert res.exit_code == 0 and "answered by the query service" in res.stdout
    assert "Helena Voss" in res.stdout
    res = CliRunner().invoke(main, ["ask", QUESTION, "--local"])
    assert res.exit_code == 0 and "answered by the query service" not in res.stdout


def test_the_service_answers_from_the_graph_as_it_is_now(settings, service):
    info, _ = service
    code, first, err = ask(QUESTION)
    assert code == 0, err
    assert any({"Helena Voss", "Aldermere University"} <= set(p["nodes"]) for p in first["paths"])
    with Store(settings.duckdb_path).connect() as con, transaction(con):   # a re-index drops the relation
        con.execute("DELETE FROM relations WHERE src_key = 'aldermere university' AND tgt_key = 'helena voss'")
    code, second, err = ask(QUESTION)
    assert code == 0, err
    assert second["params"]["graph_version"] != first["params"]["graph_version"]
    assert not any(p["nodes"][i:i + 2] in (["Helena Voss", "Aldermere University"],
                                           ["Aldermere University", "Helena Voss"])
                   for p in second["paths"] for i in range(len(p["nodes"]) - 1))


def test_other_settings_or_a_dead_service_mean_answering_here_with_one_line(settings, service, monkeypatch):
    info, _ = service
    before = answered(info)
    monkeypatch.setenv("PATHRAG_DUCKDB_MEMORY_LIMIT", "1GB")
    code, result, err = ask(QUESTION)
    assert code == 0 and result["answer"]
    assert "runs with other settings (PATHRAG_DUCKDB_MEMORY_LIMIT); answering in this process" in err
    assert answered(info) == before
    monkeypatch.delenv("PATHRAG_DUCKDB_MEMORY_LIMIT")
    # knobs of a model or an endpoint neither side uses (both offline) are no difference: the service answers
    monkeypatch.setenv("PATHRAG_LLM_TIMEOUT", "61")
    monkeypatch.setenv("PATHRAG_EMBED_TIMEOUT", "62")
    code, result, err = ask(QUESTION)
    assert code == 0 and "other settings" not in err and answered(info) == before + 1
    monkeypatch.delenv("PATHRAG_LLM_TIMEOUT")
    monkeypatch.delenv("PATHRAG_EMBED_TIMEOUT")
    # a service killed -9 leaves its file; the next ask answers itself, says so once and removes the file
    stale = ServiceInfo(url="http://127.0.0.1:9", token="t", process=f"{os.uname().nodename}:999999999:1",
                        settings=info.settings, started_at="")
    write_info(settings.home, stale)
    code, result, err = ask(QUESTION)
    assert code == 0 and result["answer"]
    assert "is gone (pid 999999999" in err and err.count("\n") == 1
    assert read_info(settings.home) is None
    write_info(settings.home, info)   # let the fixture's service remove its own file


def test_requests_need_the_token_and_bad_ones_get_the_local_error(settings, service):
    info, _ = service
    with pytest.raises(ServiceError, match="wrong token"):
        call(ServiceInfo(info.url, "not-the-token", info.process, info.settings, ""), "/health")
    with pytest.raises(ServiceError, match="bogus"):
        call(info, "/ask", {"question": QUESTION, "options": {"bogus": 1}})
    with pytest.raises(ServiceError, match="empty"):
        call(info, "/ask", {"question": "  "})
    with pytest.raises(ServiceError, match="not an ask request"):
        call(info, "/ask", {"mode": "path"})
    assert oct(service_file(settings.home).stat().st_mode & 0o777) == "0o600"


def _raw(info: ServiceInfo, request: bytes, wait: float = 30.0) -> bytes:
    """Send ``request`` as it is on a socket of its own; what the service answers before it hangs up."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(info.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_service_refuses_bodies_that_are_not_json_and_hangs_up_on_a_body_that_never_comes(settings,
                                                                                           monkeypatch):
    """Issue 61: a text/plain body is refused (415); a Content-Length that promises more than is sent gets 408
    and the connection closed once the read timeout passes, instead of holding a thread."""
    import pathrag_pipeline.query.service as service_module

    monkeypatch.setattr(service_module, "REQUEST_READ_TIMEOUT", 0.5)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(Settings.from_env(),), kwargs={"stop": stop, "log": lambda _: None},
                              daemon=True)
    thread.start()
    try:
        info = wait_ready(settings.home)
        auth = f"Authorization: Bearer {info.token}\r\n".encode()
        body = json.dumps({"question": QUESTION}).encode()
        plain = _raw(info, b"POST /ask HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Type: text/plain\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert plain.startswith(b"HTTP/1.1 415") and b"application/json" in plain
        short = _raw(info, b"POST /ask HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Type: application/json\r\n"
                     + b"Content-Length: 500\r\n\r\n" + body[:10])
        assert short.startswith(b"HTTP/1.1 408") and b"did not arrive" in short
        assert call(info, "/health")["ok"]            # the service goes on answering
    finally:
        stop.set()
        thread.join(timeout=30)


def test_status_names_the_running_service_and_never_its_token(settings, service):
    info, _ = service
    res = CliRunner().invoke(main, ["status", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["query_service"]["url"] == info.url
    assert info.token not in res.stdout
    res = CliRunner().invoke(main, ["status"])
    assert f"Query service: running at {info.url}" in res.stdout and info.token not in res.stdout


def test_a_second_service_for_the_home_is_refused(settings, service):
    info, _ = service
    res = CliRunner().invoke(main, ["serve"])
    assert res.exit_code == 1
    assert f"a query service already serves {settings.home} at {info.url}" in res.stderr


def test_sigterm_stops_the_service_with_one_line_and_removes_its_file(settings):
    env = {k: v for k, v in os.environ.items()}
    proc = subprocess.Popen([sys.executable, "-m", "pathrag_pipeline.cli", "serve"], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        info = wait_ready(settings.home, timeout=120)
        assert call(info, "/health")["ok"] is True
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert not service_file(settings.home).exists()
    assert err.strip().splitlines()[-1] == "query service stopped after 0 queries"
    assert "Traceback" not in err


def test_several_workers_answer_concurrent_asks_and_log_every_one(settings):
    """With an LLM the service runs several workers; none may leave answers unlogged or unanswered."""
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(Settings.from_env(),),
                              kwargs={"stop": stop, "log": lambda _: None, "workers": 2}, daemon=True)
    thread.start()
    info = wait_ready(settings.home)
    try:
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda i: call(info, "/ask", {"question": f"{QUESTION} ({i})"}, timeout=120),
                                    range(6)))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert len({r["query_id"] for r in replies}) == 6
    assert {r["query_id"] for r in replies} <= logged_ids(settings)


def test_waiting_offline_asks_are_answered_together_on_one_read_connection_and_spooled_until_idle(settings,
                                                                                                   monkeypatch):
    """Asks queued while the worker is busy share one read-only DuckDB connection (the service's shared work under
    load) and get the answers each would get alone. Each answer with more asks waiting is spooled and replied to at
    once; the last one is written to the tables together with the spool, so every row is there afterwards."""
    from pathrag_pipeline.query import query_log, service as service_module
    from pathrag_pipeline.query.engine import PathRAG

    questions = [QUESTION, "Where is Aldermere University?", "Who studied at Aldermere?"]
    with PathRAG(Settings.from_env(), record=False) as rag:   # closed: the batch below opens the file itself
        alone = [rag.query(q, "path") for q in questions]
    svc = service_module.QueryService(Settings.from_env(), workers=1)   # one worker takes the three queued asks
    opened: list[bool] = []
    real_open = Store._open
    monkeypatch.setattr(Store, "_open", lambda self, read_only, *a, **k: opened.append(read_only) or
                        real_open(self, read_only, *a, **k))
    logged: list[tuple[str, int]] = []
    for name in ("write_results", "spool_results"):
        real = getattr(query_log, name)
        monkeypatch.setattr(query_log, name, lambda store, results, name=name, real=real:
                            logged.append((name, len(results))) or real(store, results))
    futures = [svc.submit(q, "path", {}) for q in questions]   # queued before any worker runs: one batch
    svc.start()
    try:
        served = [f.result(timeout=120) for f in futures]
    finally:
        svc.stop()
    assert opened.count(True) == 1
    assert logged == [("spool_results", 1), ("spool_results", 1), ("write_results", 1)]
    for one, batch in zip(alone, served):
        assert (batch.answer, [p.text for p in batch.paths], batch.chunk_ids) == \
            (one.answer, [p.text for p in one.paths], one.chunk_ids)
    assert {r.query_id for r in served} <= logged_ids(settings)
    assert query_log.spooled(Store(settings.duckdb_path)) == 0


def test_offline_workers_one_per_core_answer_a_burst_as_alone_and_leave_nothing_in_the_spool(settings):
    """Offline the service runs a worker per core (most of a query's CPU is outside the GIL). Two workers answering
    a burst at once give the answers each ask gets alone, and once both are done every row is in the tables: a
    worker that spooled while the other was busy, and finds the service idle after, merges the spool (checked
    before `stop`, which would merge it too)."""
    from pathrag_pipeline.query import query_log, service as service_module
    from pathrag_pipeline.query.engine import PathRAG

    questions = [QUESTION, "Where is Aldermere University?", "Who studied at Aldermere?"] * 4
    alone = PathRAG(Settings.from_env(), record=False)
    expected = [alone.query(q, "path") for q in questions]
    assert service_module.QueryService(Settings.from_env()).workers == service_module.offline_workers()
    svc = service_module.QueryService(Settings.from_env(), workers=2)
    # the hardest interleaving, made certain: each worker decides to spool every answer (as when each saw the
    # other busy), so only the last worker out, finding the service idle, can bring the rows into the tables
    svc._idle_after_this = lambda: False
    futures = [svc.submit(q, "path", {}) for q in questions]
    svc.start()
    served = [f.result(timeout=120) for f in futures]
    deadline = time.monotonic() + 60    # the replies precede each worker's idle check: let both finish theirs
    while svc._busy and time.monotonic() < deadline:
        time.sleep(0.01)
    for t in svc._threads:          # then end the workers without stop() and its own merge
        svc._queue.put(None)
    for t in svc._threads:
        t.join(timeout=60)
    for one, got in zip(expected, served):
        assert (got.answer, [p.text for p in got.paths], got.chunk_ids) == \
            (one.answer, [p.text for p in one.paths], one.chunk_ids)
    assert query_log.spooled(Store(settings.duckdb_path)) == 0
    assert {r.query_id for r in served} <= logged_ids(settings)


def test_an_http_ask_without_options_gets_what_pathrag_ask_gives(settings, service):
    """Programs that POST a bare question get `pathrag ask`'s defaults (the CLI sends every option explicitly)."""
    info, _ = service
    bare = call(info, "/ask", {"question": QUESTION})
    code, cli, err = ask(QUESTION)
    assert code == 0, err
    for key in ("params", "answer", "paths", "chunk_ids", "keywords"):
        assert bare[key] == cli[key], key


def test_the_log_says_which_command_asked_the_service(settings, service):
    """A `pathrag ask` handed to the service is logged as asked from `pathrag ask` (not as the service's own); a
    program's bare POST, or one naming another source, as `pathrag serve`."""
    info, _ = service
    code, served, err = ask(QUESTION)
    assert code == 0, err
    bare = call(info, "/ask", {"question": QUESTION})
    claimed = call(info, "/ask", {"question": QUESTION, "asked_from": "dagster run 1234"})
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        asked = dict(con.execute("SELECT query_id, asked_from FROM queries").fetchall())
    assert asked[served["query_id"]] == "pathrag ask"
    assert asked[bare["query_id"]] == asked[claimed["query_id"]] == "pathrag serve"


def test_shared_reads_refuse_an_engine_that_logs_its_own_queries(settings):
    """Logging writes the file a shared read block holds open: only a record=False engine (the service's) may share."""
    from pathrag_pipeline.query.engine import PathRAG

    with pytest.raises(ValueError, match="record=False"):
        with PathRAG(Settings.from_env()).shared_reads():
            pass
    rag = PathRAG(Settings.from_env(), record=False)
    with rag.shared_reads():
        assert rag.store.read_memo() == {}
    assert rag.store.read_memo() is None


def _browser(info: ServiceInfo):
    """A cookie-keeping client, as a browser is, that never follows a redirect by itself."""
    import http.cookiejar
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)

    def fetch(path: str, form: dict | None = None, content_type: str = "application/x-www-form-urlencoded"):
        import urllib.error
        import urllib.parse

        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(info.url + path, data=data,
                                         headers={"Content-Type": content_type} if data is not None else {})
        try:
            with opener.open(request, timeout=60) as res:
                return res.status, res.headers, res.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers, err.read().decode()
    return fetch, jar


def test_the_page_asks_draws_the_answer_and_lists_earlier_asks_with_the_token_in_a_cookie(settings, service):
    """Issue 63 item 2: `pathrag page`'s address carries the token once; the service moves it to an HttpOnly cookie
    and sends the browser on to `/`; the form's ask comes back drawn (one node per path entity), logged with
    asked_from 'pathrag serve', and listed under the recent asks, which link back to it."""
    info, _ = service
    fetch, jar = _browser(info)
    status, _, text = fetch("/")
    assert status == 401 and "pathrag page" in text and info.token not in text      # no token, no page
    url = CliRunner().invoke(main, ["page", "--print-url"]).output.strip()
    assert url == f"{info.url}/?token={info.token}"
    status, headers, _ = fetch(url[len(info.url):])
    assert status == 303 and headers["Location"] == "/"
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    status, _, text = fetch("/")
    assert status == 200 and '<form class="ask"' in text and "<script" not in text
    status, _, text = fetch("/page", {"question": "Which sea does the Varne River flow into?", "mode": "path"})
    assert status == 200, text
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        query_id, asked_from = con.execute("SELECT query_id, asked_from FROM queries ORDER BY asked_at DESC").fetchone()
        nodes = {n for (names,) in con.execute("SELECT node_names FROM path_traces WHERE query_id = ?",
                                               [query_id]).fetchall() for n in names}
    assert asked_from == "pathrag serve" and nodes
    drawn = {html.unescape(n) for n in re.findall(r'<g class="node[^"]*" data-name="([^"]+)"',
                                                                        text)}
    assert drawn == nodes
    assert f'href="/show/{query_id}"' in text                                              # listed, to go back to
    status, _, again = fetch(f"/show/{query_id}")
    assert status == 200 and "Which sea does the Varne River flow into?" in again
    # bad input: each a message in the page, never a stack trace
    for form, message in (({"question": "  ", "mode": "path"}, "the question is empty"),
                          ({"question": "Who?", "mode": "sideways"}, "mode 'sideways' is not one of")):
        status, _, text = fetch("/page", form)
        assert status == 400 and message in html.unescape(text) and "Traceback" not in text
    status, _, text = fetch("/show/no-such-id")
    assert status == 404 and "no ask with query id 'no-such-id'" in html.unescape(text)
    status, _, text = fetch("/page", {"question": "x"}, content_type="text/plain")
    assert status == 415 and "application/x-www-form-urlencoded" in text
