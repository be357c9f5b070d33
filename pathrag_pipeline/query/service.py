"""The query service (``pathrag serve``): one long-lived process answers every ask of a home.

A standalone ``pathrag ask`` spends about 3 CPU seconds on 2 cores, almost all of it before the query: imports
(LanceDB's client alone is about a second), the graph snapshot, the BM25 index. Fifty asks at once therefore
cost fifty times that, and the median ask waited 34x a single one (issue 22, item 6). The service pays those
once and keeps them warm: the engine's graph snapshot is reloaded only when the graph version moves (a re-index),
LanceDB tables are reopened at their latest version, so answers always come from the current index.

Protocol: HTTP on 127.0.0.1 (standard library ``http.server``), ``POST /ask`` with ``{"question", "mode",
"options"}`` (the ``PathRAG.query`` keyword options; ``"asked_from": "pathrag ask"`` from the command, which the
query log then records) returning ``QueryResult.to_dict()``; ``GET /health``.
``POST /index`` with ``{"folder", "replace", "retry_failed", "width", "color"}`` runs `pathrag index` in the
service (``indexer``, given by `pathrag serve`: ``cli/indexing.ServiceIndexer``, a Dagster run, one at a time)
and returns ``{"printed", "unembedded", "dagster_run_id"}``; a service started without one answers 404.
``POST /stop`` ends the service once the requests in hand are answered (`pathrag serve --stop`; a client asks a
background service whose settings or code differ from its own). With ``idle_exit`` the service stops by itself
after that many seconds without a request (the one a command starts in the background,
``cli/background_service.py``).
Every request carries ``Authorization: Bearer TOKEN``; the token is in ``PATHRAG_HOME/query_service.json``,
readable by its owner only (``service_client``), so the service answers whoever can read the home and nobody
else. Nothing of a request is logged but its query id, mode and time (of an index request: its folder, time
and Dagster run id).

Work: handler threads queue requests; ``workers`` threads take them. Offline there is one worker per usable core
(``offline_workers``: most of an ask's CPU is in DuckDB, LanceDB and numpy, which release the GIL, so a second
thread uses the second core: 50 asks at once measured 6.5x a single ask's time with two workers against 10x with
one, and no better with more workers than cores). Each takes every request waiting, up to ``BATCH``, and answers
them together: one read-only DuckDB connection and one opening of each vector table for the batch
(``PathRAG.shared_reads``: alone, an ask spends about half its service CPU opening them). While more asks wait or
another worker is answering, an answer's log rows go to the query spool (``spool_results``: a file, no DuckDB
transaction) and the ask is replied to at once; the last answer before the service goes idle is written to the
tables with the spool in one short transaction (``write_results``: the DuckDB file is never held between batches,
and rows that find it held by an index run stay in the spool), and a worker that spooled and then finds the
service idle merges the spool (``merge_spool_now``), so no row waits in it longer than the burst that put it
there. With an LLM there are ``PATHRAG_LLM_MAX_CONCURRENCY`` workers, each answering one ask at a
time (its reads are closed while the model thinks) and writing its rows. Replies are sent once their rows are in
the tables or the spool, and `pathrag sql` and `pathrag status` merge the spool before they read, so they see
every answered ask right after its reply.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.query.service_client import (
    MAX_REQUEST_BYTES,
    ServiceInfo,
    live_service,
    remove_info,
    write_info,
)

Log = Callable[[str], None]
COOKIE_AGE = 7 * 24 * 3600   # seconds the page's browser keeps the token (a restarted service has a new one)
REQUEST_READ_TIMEOUT = 10.0   # seconds a connection may stay silent before the service hangs up (408 mid-body)
BATCH = 8   # offline asks answered together on shared reads when that many wait


def offline_workers() -> int:
    """Offline worker threads: one per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


class ServiceStartError(RuntimeError):
    """The service cannot start (another one serves this home, or the port is taken)."""


# ``queries.asked_from`` a request may name (``POST /ask``'s "asked_from"): the command that handed its ask to the
# service; anything else (the page's form, curl, another client) is logged as the service's own
ASKERS = ("pathrag ask",)
SERVICE_ASKER = "pathrag serve"


class _Request:
    def __init__(self, question: str, mode: str, options: dict[str, Any], asked_from: str = SERVICE_ASKER) -> None:
        self.question, self.mode, self.options = question, mode, options
        self.asked_from = asked_from if asked_from in ASKERS else SERVICE_ASKER
        self.future: Future = Future()


def _client_error(exc: BaseException) -> bool:
    """Errors about the request or the home that the caller should see as they would from a local ask."""
    from pathrag_pipeline.llm.client import LLMError
    from pathrag_pipeline.query.graph_cache import EmptyGraphError
    from pathrag_pipeline.storage.store import StoreLockedError

    return isinstance(exc, (ConfigError, EmptyGraphError, LLMError, ValueError, TypeError, FileNotFoundError,
                            StoreLockedError))


class QueryService:
    """The engine, its work queue and workers; ``serve`` wires it to HTTP and signals."""

    def __init__(self, settings: Settings, *, workers: int | None = None, log: Log = lambda _: None,
                 indexer: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        from pathrag_pipeline.query.engine import PathRAG

        self.settings = settings
        self.indexer = indexer
        self.rag = PathRAG(settings, record=False, asked_from=SERVICE_ASKER)
        self.log = log
        self.workers = workers or (offline_workers() if self.rag.llm is None else settings.llm_max_concurrency)
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self.answered = 0
        self._busy = 0                    # workers answering a batch (under ``_state``)
        self._state = threading.Lock()
        self._requests = 0                # requests being handled (under ``_state``)
        self._last_request = time.monotonic()
        self.stopping = threading.Event()   # set by ``POST /stop``; ``serve`` makes it its own stop event
        self.indexer_warm = threading.Event()   # the indexer's ``warm()`` is done (or there is none to warm)

    @contextlib.contextmanager
    def handling(self):
        """Around each HTTP request: an index run or a slow ask is not idle time."""
        with self._state:
            self._requests += 1
        try:
            yield
        finally:
            with self._state:
                self._requests -= 1
                self._last_request = time.monotonic()

    def wait_for_requests(self) -> None:
        """Until no request is being handled: a stopping service lets the ask or index run in hand reply (its
        client would otherwise see the connection drop and do the work again in its own process)."""
        while True:
            with self._state:
                if not self._requests:
                    return
            time.sleep(0.05)

    def idle_for(self) -> float:
        """Seconds since the last request ended, 0 while one is handled."""
        with self._state:
            return 0.0 if self._requests else time.monotonic() - self._last_request

    def warm(self) -> None:
        """Load what the first query would (imports, the graph snapshot, vector tables, the lexical index), so
        the first ask is not slower than the rest: offline by answering a throw-away question (not logged: the
        engine has ``record=False``); with an LLM only the graph is loaded (a question would call the model).
        An empty or missing index is not an error here (queries say what to do)."""
        from pathrag_pipeline.query.graph_cache import load_graph

        try:
            if self.rag.llm is None:
                self.rag.query("warm up", "path")
            else:
                load_graph(self.rag.store)
        except Exception as exc:  # noqa: BLE001 - a home without an index can still be served
            self.log(f"not warmed up: {exc}")

    def start(self) -> None:
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"pathrag-query-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=30)
        self.merge_spool()

    def submit(self, question: str, mode: str, options: dict[str, Any], asked_from: str = SERVICE_ASKER) -> Future:
        request = _Request(question, mode, options, asked_from)
        self._queue.put(request)
        return request.future

    def _work(self) -> None:
        while True:
            req = self._queue.get()
            if req is None:
                return
            batch, stop = [req], False
            # offline, the asks already waiting are answered together: one DuckDB connection and one opening of
            # each vector table for all of them (``PathRAG.shared_reads``). With an LLM each worker answers one ask
            # at a time (its reads must not stay open while the model thinks)
            while self.rag.llm is None and len(batch) < BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            with self._state:
                self._busy += 1
            spooled = False
            try:
                spooled = self._answer(batch)
            finally:
                with self._state:
                    self._busy -= 1
                    idle = self._busy == 0 and self._queue.empty()
                if spooled and idle:
                    self.merge_spool()
            if stop:
                return

    def _idle_after_this(self) -> bool:
        """Nothing waits and no other worker answers: this worker's answer is the last of the burst."""
        with self._state:
            return self._busy <= 1 and self._queue.empty()

    def merge_spool(self) -> None:
        from pathrag_pipeline.query.query_log import merge_spool_now

        try:
            merge_spool_now(self.rag.store)
        except Exception as exc:  # noqa: BLE001 - the rows stay in the spool; the next reader merges them
            self.log(f"query spool not merged ({type(exc).__name__}: {exc})")

    def _answer(self, batch: list[_Request]) -> bool:
        """Answer ``batch`` (offline, on shared reads) and reply to each ask once its log rows are safe: an answer
        with more asks waiting after it (in the batch or the queue) or another worker busy goes to the query spool
        and is replied to at once, so no ask waits for the rest of its batch; the last one, when nothing waits, is
        written to the tables with the spool (one short transaction) before its reply. Returns whether every
        answer of the batch went to the spool (so the caller merges it if the service is now idle)."""
        last: tuple[_Request, Any] | None = None
        shared = self.rag.shared_reads() if self.rag.llm is None else contextlib.nullcontext()
        try:
            with shared:
                for i, req in enumerate(batch):
                    try:
                        result = self.rag.query(req.question, req.mode, **req.options)
                    except BaseException as exc:  # noqa: BLE001 - one bad request never stops the others
                        req.future.set_exception(exc)
                        continue
                    result.asked_from = req.asked_from   # logged as the command that asked (``ASKERS``)
                    if self.rag.llm is None and (i < len(batch) - 1 or not self._idle_after_this()):
                        self._flush([(req, result)], spool=True)
                    else:
                        last = (req, result)
        except BaseException as exc:  # noqa: BLE001 - the shared reads could not be opened (the file held too
            # long by a writer): every ask not yet answered gets that error, as it would alone
            for req in batch:
                if not req.future.done() and (last is None or req is not last[0]):
                    req.future.set_exception(exc)
        if last is not None:
            self._flush([last])
        return last is None

    def _flush(self, done: list[tuple[_Request, Any]], spool: bool = False) -> None:
        from pathrag_pipeline.query.query_log import spool_results, write_results

        if not done:
            return
        try:
            how = (spool_results if spool else write_results)(self.rag.store, [r for _, r in done])
        except Exception as exc:  # noqa: BLE001 - the answers stand; say why they are not logged
            how = f"not logged ({type(exc).__name__}: {exc})"
        for req, result in done:
            self.answered += 1
            self.log(f"query {result.query_id} {result.mode} {result.total_ms:.0f} ms ({how})")
            req.future.set_result(result)


def _handler(service: QueryService, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "pathrag-query-service"
        protocol_version = "HTTP/1.1"
        # seconds a connection may stay silent: a request whose body never comes (its Content-Length promises
        # more than it sends) gets 408 and its connection closed, instead of holding a thread (issue 61)
        timeout = REQUEST_READ_TIMEOUT

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Quiet: the service logs one line per answered query instead."""

        def _reply(self, status: int, data: dict[str, Any]) -> None:
            body = json.dumps(data, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _page(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                                                        "img-src data:; form-action 'self'")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _cookie_token(self) -> str:
            from http.cookies import CookieError, SimpleCookie

            try:
                jar = SimpleCookie(self.headers.get("Cookie", ""))
            except CookieError:
                return ""
            from pathrag_pipeline.query.service_page import COOKIE

            return jar[COOKIE].value if COOKIE in jar else ""

        def _authorised(self, page: bool = False) -> bool:
            given = self.headers.get("Authorization", "")
            if secrets.compare_digest(given.encode(), f"Bearer {token}".encode()) or (
                    page and secrets.compare_digest(self._cookie_token().encode(), token.encode())):
                return True
            if page:
                from pathrag_pipeline.query.answer_page import page as html_page

                self._page(401, html_page("pathrag", '<p class="error">This page needs the query service\'s token: '
                                                     "open it with <code>pathrag page</code>.</p>"))
            else:
                self._reply(401, {"error": "missing or wrong token: read it from PATHRAG_HOME/query_service.json"})
            return False

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            with service.handling():
                self._get()

        def do_POST(self) -> None:  # noqa: N802
            with service.handling():
                self._post()

        def _get(self) -> None:
            from urllib.parse import parse_qs, urlsplit

            url = urlsplit(self.path)
            if url.path == "/" and "token" in parse_qs(url.query):
                given = parse_qs(url.query)["token"][0]
                if not secrets.compare_digest(given.encode(), token.encode()):
                    self._authorised(page=True)
                    return
                from pathrag_pipeline.query.service_page import COOKIE

                # the token moves to a cookie only this page's requests carry, and leaves the address bar
                # kept across browser restarts (Max-Age) until the service's next start makes a new token
                self._page(303, "", {"Location": "/", "Set-Cookie": f"{COOKIE}={token}; HttpOnly; "
                                                                      f"SameSite=Strict; Path=/; Max-Age={COOKIE_AGE}"})
                return
            if url.path == "/" or url.path.startswith("/show/"):
                if self._authorised(page=True):
                    self._page(*service_page_get(service, url.path))
                return
            if url.path == "/page":   # the form sent by GET: an address that asks, e.g. bookmarked or scripted
                if self._authorised(page=True):
                    self._page(*service_page_post(service, url.query.encode()))
                return
            if not self._authorised():
                return
            if self.path != "/health":
                self._reply(404, {"error": f"no {self.path}: use POST /ask or GET /health"})
                return
            self._reply(200, {"ok": True, "answered": service.answered, "workers": service.workers,
                              "indexer_warm": service.indexer_warm.is_set()})

        def _body(self, wanted: str) -> bytes | None:
            """The request's body, or None after replying why not (wrong Content-Type, size, or a body that never
            comes)."""
            reply = self._page if wanted != "application/json" else None
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

            def refuse(status: int, message: str) -> None:
                self.close_connection = True
                if reply is not None:
                    from pathrag_pipeline.query.answer_page import page as html_page

                    reply(status, html_page("pathrag", f'<p class="error">{message}</p>'))
                else:
                    self._reply(status, {"error": message})

            if kind != wanted:
                refuse(415, f"Content-Type {kind or '(none)'!r}: send the ask as {wanted}")
                return None
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_REQUEST_BYTES:
                refuse(413 if length > 0 else 400, f"Content-Length {self.headers.get('Content-Length')!r}: give the "
                                                   f"body's size in bytes, at most {MAX_REQUEST_BYTES}")
                return None
            try:
                return self.rfile.read(length)
            except TimeoutError:
                refuse(408, f"the request's body did not arrive within {REQUEST_READ_TIMEOUT:g} s "
                            f"(Content-Length {length}, fewer bytes sent)")
                return None

        def _post(self) -> None:
            if self.path == "/page":
                if not self._authorised(page=True):
                    return
                body = self._body("application/x-www-form-urlencoded")
                if body is not None:
                    self._page(*service_page_post(service, body))
                return
            if not self._authorised():
                return
            if self.path == "/index" and service.indexer is not None:
                self._index()
                return
            if self.path == "/stop":
                service.log("asked to stop (POST /stop)")
                self._reply(200, {"stopping": True})
                service.stopping.set()
                return
            if self.path != "/ask":
                self._reply(404, {"error": f"no {self.path}: use POST /ask, POST /stop or GET /health"})
                return
            body = self._body("application/json")
            if body is None:
                return
            try:
                data = json.loads(body)
                question, mode = data["question"], data.get("mode", "path")
                options = data.get("options") or {}
                asked_from = data.get("asked_from", SERVICE_ASKER)
                if not isinstance(question, str) or not isinstance(mode, str) or not isinstance(options, dict):
                    raise TypeError("question and mode must be text and options an object")
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": f"not an ask request ({exc}): send "
                                           '{"question": "...", "mode": "path", "options": {}}'})
                return
            try:
                result = service.submit(question, mode, options, asked_from).result()
            except BaseException as exc:  # noqa: BLE001
                if _client_error(exc):
                    self._reply(400, {"error": str(exc)})
                else:
                    service.log(f"query failed: {type(exc).__name__}: {exc}")
                    self._reply(500, {"error": f"the query failed in the service ({type(exc).__name__}: {exc})"})
                return
            self._reply(200, result.to_dict())

        def _index(self) -> None:
            body = self._body("application/json")
            if body is None:
                return
            try:
                data = json.loads(body)
                if not isinstance(data, dict) or not isinstance(data.get("folder"), str):
                    raise TypeError("folder must be text")
            except (ValueError, TypeError) as exc:
                self._reply(400, {"error": f"not an index request ({exc}): send {{\"folder\": \"...\"}}"})
                return
            started = time.perf_counter()
            try:
                reply = service.indexer(data)
            except Exception as exc:  # noqa: BLE001 - the caller shows it; the service keeps serving
                from pathrag_pipeline.errors import PipelineError

                if isinstance(exc, (PipelineError, ConfigError)):
                    self._reply(400, {"error": str(exc)})
                else:
                    service.log(f"index failed: {type(exc).__name__}: {exc}")
                    self._reply(500, {"error": f"the index run failed in the service ({type(exc).__name__}: {exc})"})
                return
            service.log(f"index of {data['folder']} in {time.perf_counter() - started:.1f} s "
                        f"(Dagster run {reply.get('dagster_run_id') or 'none: up to date'})")
            self._reply(200, reply)

    return Handler


def _recent(service: QueryService) -> list:
    from pathrag_pipeline.query.service_page import recent_asks

    try:
        with service.rag.store.connect(read_only=True) as con:
            return recent_asks(con)
    except Exception:   # noqa: BLE001 - no index yet, or the log unreadable: the page shows no list
        return []


def service_page_get(service: QueryService, path: str) -> tuple[int, str]:
    """(status, HTML) of ``GET /`` (the form and the recent asks) or ``GET /show/QUERY_ID`` (a logged ask drawn)."""
    from pathrag_pipeline.query import service_page
    from pathrag_pipeline.query.answer_page import UnknownQuery, render, view_of_logged

    service.merge_spool()
    rows = _recent(service)
    if path == "/":
        return 200, service_page.home(rows)
    query_id = path[len("/show/"):]
    try:
        with service.rag.store.connect(read_only=True) as con:
            view = view_of_logged(con, query_id)
    except (UnknownQuery, FileNotFoundError) as exc:
        return 404, service_page.home(rows, message=str(exc))
    return 200, render(view, before=service_page.form(view.question, view.mode),
                       after=service_page.recent(rows))


def service_page_post(service: QueryService, body: bytes) -> tuple[int, str]:
    """(status, HTML) of a question asked from the page: the answer drawn, or the form saying why not."""
    from urllib.parse import parse_qs

    from pathrag_pipeline.query import service_page
    from pathrag_pipeline.query.answer_page import render, view_of_result
    from pathrag_pipeline.query.params import MODES

    fields = parse_qs(body.decode("utf-8", "replace"))
    question = (fields.get("question") or [""])[0].strip()
    mode = (fields.get("mode") or ["path"])[0]
    rows = _recent(service)
    if not question:
        return 400, service_page.home(rows, message="the question is empty: type one, e.g. Who founded Aldermere "
                                                    "University?", mode=mode)
    if mode not in MODES:
        return 400, service_page.home(rows, message=f"mode {mode!r} is not one of {', '.join(MODES)}",
                                      question=question)
    try:
        result = service.submit(question, mode, {}).result()
        with service.rag.store.connect(read_only=True) as con:
            view = view_of_result(result, con)
    except BaseException as exc:  # noqa: BLE001 - the page says it; a stack trace never reaches it
        if not _client_error(exc):
            service.log(f"query failed: {type(exc).__name__}: {exc}")
        return (400 if _client_error(exc) else 500), service_page.home(rows, message=str(exc), question=question,
                                                                         mode=mode)
    service.merge_spool()
    return 200, render(view, before=service_page.form(question, mode), after=service_page.recent(_recent(service)))


class _Server(ThreadingHTTPServer):
    # the listen backlog: the standard library's 5 reset connections when 50 asks arrive at once
    request_queue_size = 256
    daemon_threads = True


def serve(settings: Settings, *, host: str = "127.0.0.1", port: int = 0, workers: int | None = None,
          log: Log = lambda m: print(m, file=sys.stderr, flush=True), ready: Callable[[ServiceInfo], None] | None = None,
          stop: threading.Event | None = None, indexer: Any = None, idle_exit: float | None = None,
          background: bool = False) -> int:
    """Serve the home of ``settings`` until SIGTERM, SIGINT, ``stop``, ``POST /stop`` or ``idle_exit`` seconds
    without a request; returns the queries answered. ``indexer`` (a callable taking an index request; its
    ``warm()`` runs in a thread once asks are answered, its ``close()`` at the end) makes ``POST /index`` run index
    runs here. ``background``: started by a command for the next ones (``cli/background_service.py``), said in
    the description so a client that differs from it asks it to stop."""
    from pathrag_pipeline.query.service_client import code_version
    from pathrag_pipeline.storage.process_identity import describe, identity

    home = settings.home
    running = live_service(home)
    if running is not None:
        raise ServiceStartError(f"a query service already serves {home} at {running.url} "
                                f"({describe(running.process)}); stop it first")
    home.mkdir(parents=True, exist_ok=True)
    service = QueryService(settings, workers=workers, log=log, indexer=indexer)
    service.warm()
    try:
        server = _Server((host, port), _handler(service, token := secrets.token_urlsafe(32)))
    except OSError as exc:
        raise ServiceStartError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); give another --port") \
            from None
    bound_host, bound_port = server.server_address[:2]
    info = ServiceInfo(url=f"http://{bound_host}:{bound_port}", token=token, process=identity(),
                       settings=settings.public(),
                       started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       secrets=settings.secrets_digest(token), code=code_version(), background=background)
    stop = service.stopping = stop or threading.Event()   # POST /stop sets the caller's event too
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    service.start()
    http_thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    http_thread.start()
    write_info(home, info)
    if ready is not None:
        ready(info)
    if hasattr(indexer, "warm"):
        threading.Thread(target=_warm_indexer, args=(indexer, log, service.indexer_warm), name="pathrag-index-warm",
                         daemon=True).start()
    else:
        service.indexer_warm.set()
    try:
        while not stop.wait(1.0 if idle_exit is None else min(1.0, idle_exit / 4)):
            if idle_exit is not None and service.idle_for() > idle_exit:
                log(f"no request for {idle_exit:g} s: stopping")
                break
    finally:
        remove_info(home, token)
        server.shutdown()
        server.server_close()
        service.wait_for_requests()
        service.stop()
        if hasattr(indexer, "close"):
            indexer.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return service.answered


def _warm_indexer(indexer: Any, log: Log, done: threading.Event) -> None:
    try:
        indexer.warm()
    except Exception as exc:  # noqa: BLE001 - the first index request tries again and says why
        log(f"index runs not warmed up: {type(exc).__name__}: {exc}")
    finally:
        done.set()


def wait_ready(home, timeout: float = 60.0, warm: bool = False) -> ServiceInfo:
    """The service description once a starting service has written it (tests, benches); with ``warm``, once its
    indexer has warmed up too (``GET /health``'s ``indexer_warm``): an index request sent before waits for it."""
    from pathrag_pipeline.query.service_client import ServiceError, ServiceUnavailable, call

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = live_service(home)
        if info is not None:
            if not warm:
                return info
            try:
                if call(info, "/health", timeout=5.0).get("indexer_warm", True):
                    return info
            except (ServiceUnavailable, ServiceError):
                pass
        time.sleep(0.05)
    raise TimeoutError(f"no query service came up{' warm' if warm else ''} for {home} within {timeout:.0f} s")
