"""The HTTP transport under the LLM client: what makes it fit local servers that serve one request at a time.

openai retries every transport fault on its own (timeouts, connection errors, 5xx) and httpx bounds each
single read, not the request. Against llama.cpp or Ollama on a laptop that is not enough:

- **Concurrency per attempt, adaptive.** Each HTTP attempt (retries included) takes a slot of a limiter, so
  queued requests wait in the client, not in the server's queue where their timeout runs. After a timeout
  the limit halves (down to 1): a serial server then sees one request at a time.
- **A total deadline per attempt.** The caller waits ``timeout`` seconds from the moment the request was sent
  for the whole reply; past it the attempt raises ``httpx2.ReadTimeout`` (retried by openai like any timeout)
  instead of running for minutes, however slowly the body trickles.
- **An abandoned request keeps its slot until the server is done with it.** A server does not stop generating
  when the client gives up on a request (llama.cpp, Ollama: the work goes on, and a one-slot server queues
  whatever comes next behind it). So a timed-out attempt is not hung up: its connection is read to the end in
  the background, for up to ``DRAIN_FACTOR`` x ``timeout`` more seconds, and only then gives its limiter slot
  back. The retry waits for that slot instead of stacking a second request on a busy server: "wait", never
  stack (issue 59). Without a slot free, callers still see a stopped client at once.
- **A stop for the whole client.** After ``stop_after`` attempts in a row failed by timeout, connection
  error or 5xx, with no success in between, and (but for connection errors: nothing listens) no answer at all for
  ``QUIET_FACTOR`` x ``timeout`` seconds across every slot, the client stops (a run where some requests hang
  or fail while others succeed goes on, issue 61): every attempt in flight or later raises
  ``ClientStopped`` at once. It is an ``openai.OpenAIError``, which openai and instructor propagate without
  retrying, so started calls do not each exhaust their retries. The stop lifts after ``cooldown`` seconds.
- **Replies that are not answers.** A 4xx/5xx whose body says the request's ``response_format`` is not
  supported (llama.cpp: "Input should be 'text' or 'json_object'") stops the client at once with
  ``UnsupportedRequest``; a 200 with ``choices: []`` raises ``EmptyReply`` (retried by openai as a transport
  fault), a 200 whose body is not a JSON object (cut off mid-reply) ``MalformedReply`` (the same, and it counts
  towards the stop like a 5xx), and so does an embeddings reply with fewer (or more) vectors than texts; a structured answer that ended at the output cap (``finish_reason: "length"``, or a tool call
  whose completion tokens reached ``max_tokens``: llama.cpp reports ``tool_calls`` then) raises
  ``OutputTruncated`` (not retried: the same request would be cut again).
- **Requests the endpoint refuses for good.** HTTP 401/403 (a wrong or missing API key, no access) and
  404 (a model the server does not serve, or a base URL without ``/v1``) stop the client at once with
  ``Refused``, naming the setting to fix: no retry or later chunk could succeed.
- **Parameters a model refuses.** OpenAI's reasoning models (o-series, GPT-5.x, also on Azure) answer a
  ``max_tokens`` with HTTP 400 ``unsupported_parameter`` ("Use 'max_completion_tokens' instead") and any
  ``temperature`` but 1 with ``unsupported_value``. On such a reply the transport resends the same request
  once with ``max_completion_tokens`` (same cap) or without ``temperature``, logs a warning once, and sends
  every later request of the client in that form from the start. Servers that accept the parameters never
  see a change.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from pathrag_pipeline.llm.redaction import redact
from pathrag_pipeline.slim_imports import import_openai

openai = import_openai()   # not ``import openai``: its unused generated models stay unloaded (slim_imports)

log = logging.getLogger(__name__)

UNSUPPORTED_MARKERS = ("input should be 'text' or 'json_object'", "response_format", "json_schema")
# Chat parameters a model may refuse, and what the transport does instead (see the module docstring).
ADAPTATIONS: dict[str, str] = {
    "max_tokens": "sends the output cap as max_completion_tokens",
    "temperature": "leaves temperature out (the model accepts only its default, so answers may vary)",
}


# A client stops only when its endpoint has answered nothing for this many timeouts (besides the failures in a
# row): faults on part of the requests never stop it while others keep succeeding.
QUIET_FACTOR = 2.0
# How long a timed-out attempt's reply is still read in the background, holding its limiter slot, as a multiple
# of the timeout: long enough for a local server to finish what it was given, bounded for a server that hangs.
DRAIN_FACTOR = 4.0
# 429 replies in a row (no other reply between them) after which the client stops: openai backs off between
# retries (honouring Retry-After), so this is minutes of a limit that does not lift, not a burst under load.
RATE_LIMIT_STOP = 20


class ClientStopped(openai.OpenAIError):
    """The client stopped after repeated failures; ``reason`` says what happened and what to set."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnsupportedRequest(ClientStopped):
    """The server cannot accept the request's shape (its structured-output mode); retrying cannot help."""


class Refused(ClientStopped):
    """The endpoint refused the request for good (HTTP 401/403/404): the key, the model or the URL is wrong."""


class OutputTruncated(openai.OpenAIError):
    """The answer stopped at the output cap (``max_tokens``): it is cut, not a valid answer."""

    def __init__(self, message: str, *, max_tokens: int | None, completion_tokens: int | None) -> None:
        super().__init__(message)
        self.max_tokens = max_tokens
        self.completion_tokens = completion_tokens


class EmptyReply(Exception):
    """A 200 reply with no choices: a server fault, retried like a dropped connection."""


class MalformedReply(EmptyReply):
    """A 200 reply whose body is not a JSON object (truncated, an HTML page): retried like a dropped connection."""


@dataclass
class CallContext:
    """What the client tells the transport about the call running in this thread."""

    structured: bool = False
    max_tokens: int | None = None


@dataclass
class TransportState:
    """Counters shared by every thread using one client."""

    limit: int
    initial_limit: int
    in_use: int = 0
    failures_in_row: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # failure kind -> count in the current streak
    last_failure: str = ""
    stopped: ClientStopped | None = None
    stopped_at: float = 0.0
    backoffs: int = 0
    adapted: set[str] = field(default_factory=set)  # ADAPTATIONS keys learnt from the server's refusals
    rate_limited_in_row: int = 0                     # HTTP 429 replies since the last reply that was not one
    last_answer: float = field(default_factory=time.monotonic)   # when the endpoint last answered (or the start)


class _DeadlineStream(httpx2.SyncByteStream):
    def __init__(self, inner: Any, deadline: float, request: httpx2.Request, timeout: float) -> None:
        self._inner, self._deadline, self._request, self._timeout = inner, deadline, request, timeout

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if time.monotonic() > self._deadline:
                raise httpx2.ReadTimeout(
                    f"the reply took longer than {self._timeout:g} s in total", request=self._request)
            yield chunk

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class _Attempt:
    """One HTTP exchange run in a thread of its own (a ``_Runners`` thread); the transport's limiter slot is
    released when it ends, whether the caller waited for it or gave up (timed out) before."""

    def __init__(self, transport: "GuardedTransport", request: httpx2.Request) -> None:
        self.transport, self.request = transport, request
        self.done = threading.Event()
        self.response: httpx2.Response | None = None
        self.body = b""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.response, self.body = self.transport._exchange(self.request)
        except BaseException as exc:   # handed to the caller, or dropped with the abandoned attempt
            self.error = exc
        finally:
            self.transport._release()   # ``done`` is set by the runner once it is free (``_Runners.run``)


# How long a runner thread waits for the next attempt before it ends.
RUNNER_IDLE_S = 60.0


class _Runners:
    """Daemon threads that run attempts, each kept for the next attempt once its own has ended (every transport of
    the process shares them). A thread per attempt cost its start every request: the OS thread's creation and the
    wait for it to run, a tenth of a one-call query's own time on a 2-core machine busy with another process (issue
    64). A runner is never taken from a running attempt, so an abandoned attempt still keeps its own thread until
    the server is done with it; a runner idle for ``RUNNER_IDLE_S`` ends. A forked child starts with none (its
    parent's threads do not exist there)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []

    def run(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        """``work()`` in a runner, then ``then()`` once that runner is free again (so the caller's next attempt,
        sent when ``then`` tells it this one ended, finds it idle)."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="llm-attempt", daemon=True).start()
        inbox.put((work, then))

    def _serve(self, inbox: queue.SimpleQueue) -> None:
        while True:
            try:
                work, then = inbox.get(timeout=RUNNER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if any(q is inbox for q in self._idle):
                        self._idle[:] = [q for q in self._idle if q is not inbox]
                        return
                continue   # handed an attempt as it timed out: the attempt is in the inbox
            try:
                work()
            finally:
                with self._lock:
                    self._idle.append(inbox)
                then()
                work = then = None   # the ended attempt (its reply's body) is not kept while the runner waits

    def forget(self) -> None:
        """In a forked child: the parent's runner threads are not there."""
        self._lock = threading.Lock()
        self._idle = []


_RUNNERS = _Runners()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RUNNERS.forget)


@functools.lru_cache(maxsize=4)
def _default_ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """httpx's default verifying context (its CA bundle, or SSL_CERT_FILE/SSL_CERT_DIR), made once per process and
    per those two variables: making it loads the CA bundle, ~60 ms, and a transport was made per run and client
    (a `pathrag serve` edit paid it every run). A context is safe to share between connections."""
    return httpx2.create_ssl_context()


class GuardedTransport(httpx2.HTTPTransport):
    """``httpx2.HTTPTransport`` with the limiter, deadline, stop and reply checks described above."""

    def __init__(self, *, timeout: float, max_concurrency: int, stop_after: int, base_url: str,
                 cooldown: float = 60.0, on_send: Callable[[httpx2.Request], None] | None = None,
                 on_usage: Callable[[int, int], None] | None = None,
                 settings: str = "PATHRAG_LLM", **kwargs: Any) -> None:
        kwargs.setdefault("proxy", env_proxy_for(base_url))
        if "verify" not in kwargs and "cert" not in kwargs:
            kwargs["verify"] = _default_ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        super().__init__(**kwargs)
        self.on_send = on_send  # called for each attempt really sent (not for one refused by a stop)
        # called with (prompt, completion) tokens of every reply that reports them, whatever becomes of it:
        # an answer cut at the cap, refused by the parser or re-asked cost what the server says (issue 27)
        self.on_usage = on_usage
        self.timeout = timeout
        self.stop_after = max(1, stop_after)
        self.cooldown = cooldown
        self.base_url = base_url
        self.settings = settings  # prefix of the settings a refusal names (PATHRAG_LLM or PATHRAG_EMBED)
        self.state = TransportState(limit=max_concurrency, initial_limit=max_concurrency)
        self._cond = threading.Condition()
        self.context = threading.local()

    # ---- limiter and stop ----------------------------------------------------------------------
    def _acquire(self) -> None:
        with self._cond:
            while True:
                self._check_stopped()
                if self.state.in_use < self.state.limit:
                    self.state.in_use += 1
                    return
                self._cond.wait(0.2)

    def _release(self) -> None:
        with self._cond:
            self.state.in_use -= 1
            self._cond.notify_all()

    def _check_stopped(self) -> None:
        stopped = self.state.stopped
        if stopped is None:
            return
        if time.monotonic() - self.state.stopped_at >= self.cooldown:
            self.state.stopped = None  # try again: the server may be back
            self.state.failures_in_row = 0
            self.state.kinds.clear()
            return
        raise stopped

    def stop(self, error: ClientStopped) -> None:
        with self._cond:
            if self.state.stopped is None:
                self.state.stopped = error
                self.state.stopped_at = time.monotonic()
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self.state.stopped = None
            self.state.failures_in_row = 0
            self.state.kinds.clear()
            self._cond.notify_all()

    def _succeeded(self) -> None:
        with self._cond:
            self.state.last_answer = time.monotonic()
            self.state.failures_in_row = 0
            self.state.rate_limited_in_row = 0
            self.state.kinds.clear()

    def _rate_limited(self, text: str) -> None:
        """A 429. One is normal under load (openai waits and retries); ``RATE_LIMIT_STOP`` in a row with no other
        reply between them is a limit that is not lifting (a quota, a key capped at zero): stop, in one line."""
        with self._cond:
            state = self.state
            state.rate_limited_in_row += 1
            if state.rate_limited_in_row >= RATE_LIMIT_STOP and state.stopped is None:
                said = redact(" ".join(text.split())[:160])
                state.stopped = ClientStopped(
                    f"the server at {self.base_url} rate-limited {state.rate_limited_in_row} requests in a row "
                    f"(HTTP 429: {said}); wait for the limit to lift or raise it with your provider, or lower "
                    f"{self.settings}_MAX_CONCURRENCY, then run again (finished work is kept)"
                    if self.settings == "PATHRAG_LLM" else
                    f"the server at {self.base_url} rate-limited {state.rate_limited_in_row} requests in a row "
                    f"(HTTP 429: {said}); wait for the limit to lift or raise it with your provider, then run "
                    f"again (finished work is kept; {self.settings}_BASE_URL names this endpoint)")
                state.stopped_at = time.monotonic()
            self._cond.notify_all()

    def _failed(self, kind: str, detail: str) -> None:
        with self._cond:
            state = self.state
            state.failures_in_row += 1
            state.kinds[kind] = state.kinds.get(kind, 0) + 1
            state.last_failure = redact(detail)
            if kind == "timeout" and state.limit > 1:
                state.limit = max(1, state.limit // 2)
                state.backoffs += 1
            silent = time.monotonic() - state.last_answer >= QUIET_FACTOR * self.timeout
            if state.failures_in_row >= self.stop_after and state.stopped is None and (kind == "connect" or silent):
                state.stopped = ClientStopped(self._stop_reason())
                state.stopped_at = time.monotonic()
            self._cond.notify_all()

    def _stop_reason(self) -> str:
        state = self.state
        n = state.failures_in_row
        kind = max(state.kinds, key=lambda k: state.kinds[k]) if state.kinds else "error"
        if kind == "timeout":
            reduced = (f"; concurrency was reduced from {state.initial_limit} to {state.limit}"
                       if state.limit < state.initial_limit else "")
            hint = ("it may be serving one request at a time: set PATHRAG_LLM_MAX_CONCURRENCY=1, "
                    if state.initial_limit > 1 else "")
            lower = ("lower PATHRAG_LLM_MAX_TOKENS / PATHRAG_CHUNK_TOKENS" if self.settings == "PATHRAG_LLM"
                     else "lower PATHRAG_CHUNK_TOKENS")
            return (f"the server at {self.base_url} answered none of {n} requests in a row within "
                    f"{self.timeout:g} s, and nothing for {QUIET_FACTOR * self.timeout:g} s{reduced}. "
                    f"It is up but slow: {hint}raise {self.settings}_TIMEOUT "
                    f"(e.g. 600) or {lower}")
        if kind == "connect":
            return (f"could not connect to {self.base_url} ({n} attempts in a row: {state.last_failure}); "
                    f"is the server up? Check {self.settings}_BASE_URL")
        return (f"the server at {self.base_url} ({self.settings}_BASE_URL) failed {n} requests in a row "
                f"({state.last_failure}); check the server's log")

    # ---- the request ---------------------------------------------------------------------------
    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request = self._adapt(request, self.state.adapted)
        reply, body = self._send(request)
        for _ in ADAPTATIONS:  # at most one resend per parameter a model can refuse
            refused = self._refused_parameter(request, reply, body)
            if refused is None:
                break
            request = self._adapt(request, {refused})
            reply, body = self._send(request)
        self._inspect(request, reply, body)
        return reply

    def _send(self, request: httpx2.Request) -> tuple[httpx2.Response, bytes]:
        """One attempt: limiter slot, send, the whole body within ``timeout``. The exchange runs in a thread of
        its own, which keeps the slot until the server has answered (or ``DRAIN_FACTOR`` x ``timeout`` passed),
        so a timed-out attempt is abandoned without being hung up (see the module docstring)."""
        self._acquire()
        try:
            if self.on_send is not None:
                self.on_send(request)
        except BaseException:
            self._release()
            raise
        attempt = _Attempt(self, request)
        _RUNNERS.run(attempt.run, attempt.done.set)
        if not attempt.done.wait(self.timeout):
            self._failed("timeout", f"ReadTimeout: no whole reply within {self.timeout:g} s (the request is "
                                    "left to finish on the server before another is sent)")
            raise httpx2.ReadTimeout(f"the reply took longer than {self.timeout:g} s in total", request=request)
        if attempt.error is not None:
            exc = attempt.error
            if isinstance(exc, (httpx2.ConnectTimeout, httpx2.ConnectError)):
                self._failed("connect", f"{type(exc).__name__}: {exc}")  # nothing is listening, or no route
            elif isinstance(exc, httpx2.TimeoutException):
                self._failed("timeout", f"{type(exc).__name__}: {exc}")  # connected, but no (whole) answer in time
            elif isinstance(exc, httpx2.TransportError):
                self._failed("connect", f"{type(exc).__name__}: {exc}")
            raise exc
        response, body = attempt.response, attempt.body
        assert response is not None
        # the body as the server's stream, read here once: the reply then holds it decoded (Content-Encoding, e.g.
        # a gzip proxy, undone), which is what the checks below look at and what the client reads (``content=``
        # would copy the headers and add content ones: ~0.5 ms a reply on 2 cores)
        def reply_of(raw: bytes) -> httpx2.Response:
            return httpx2.Response(response.status_code, headers=response.headers, stream=httpx2.ByteStream(raw),
                                   request=request, extensions=response.extensions)

        reply = reply_of(body)
        try:
            return reply, reply.read()
        except httpx2.DecodingError:   # not what its Content-Encoding says: checked as sent, the client says why
            return reply_of(body), body

    def _exchange(self, request: httpx2.Request) -> tuple[httpx2.Response, bytes]:
        """Send and read the whole body, for at most ``DRAIN_FACTOR`` x ``timeout`` (+ the timeout) seconds."""
        budget = self.timeout * (1.0 + DRAIN_FACTOR)
        timeouts = dict(request.extensions.get("timeout") or {})
        timeouts["read"] = budget
        request.extensions = {**request.extensions, "timeout": timeouts}
        deadline = time.monotonic() + budget
        response = httpx2.HTTPTransport.handle_request(self, request)
        stream = _DeadlineStream(response.stream, deadline, request, budget)
        try:
            body = b"".join(stream)
        finally:
            stream.close()
        return response, body

    def _refusal(self, status: int, text: str, sent: dict[str, Any], path: str) -> str:
        """What a 401/403/404 means and which setting fixes it (the server's words redacted and shortened)."""
        error = (_json(text.encode("utf-8")) or {}) if text else {}
        message = error.get("error", error) if isinstance(error, dict) else error
        if isinstance(message, dict):
            message = message.get("message") or message.get("detail") or message
        said = redact(" ".join(str(message or text).split())[:200])
        key = (f"{self.settings}_API_KEY" if self.settings == "PATHRAG_LLM" else
               f"{self.settings}_API_KEY (or PATHRAG_LLM_API_KEY, its fallback)")
        if status == 401:
            fix = f"the API key was refused: set {key} (or OPENAI_API_KEY) to a valid key for this server"
        elif status == 403:
            fix = f"the key has no access to this model or endpoint: check {key} and {self.settings}_MODEL"
        elif "model" in said.lower():
            fix = (f"the server does not serve model {sent.get('model')!r}: set {self.settings}_MODEL to one it "
                   f"lists at {self.base_url}/models")
        else:
            fix = (f"the server has no route {path}: check {self.settings}_BASE_URL (most servers want it to "
                   "end in /v1)")
        return f"the server at {self.base_url} answered HTTP {status} ({said}); {fix}"

    # ---- parameters a model refuses ------------------------------------------------------------
    def _refused_parameter(self, request: httpx2.Request, reply: httpx2.Response, body: bytes) -> str | None:
        """The ADAPTATIONS key a 400 reply refuses, learnt for every later request; None for any other reply."""
        if reply.status_code != 400 or not request.url.path.endswith("/chat/completions"):
            return None
        data = _json(body)
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            return None
        param = error.get("param")
        sent = _json(request.content)
        if param not in ADAPTATIONS or not isinstance(sent, dict) or param not in sent:
            return None
        if error.get("code") not in ("unsupported_parameter", "unsupported_value"):
            return None
        with self._cond:
            new = param not in self.state.adapted
            self.state.adapted.add(param)
        if new:
            log.warning("the model %r at %s refuses %s (%s); this client now %s", sent.get("model"),
                        self.base_url, param, redact(" ".join(str(error.get("message", "")).split())[:160]),
                        ADAPTATIONS[param])
        return param

    @staticmethod
    def _adapt(request: httpx2.Request, params: set[str]) -> httpx2.Request:
        """``request`` with the ADAPTATIONS in ``params`` applied to its JSON body (itself when none apply)."""
        if not params or request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return request
        sent = _json(request.content)
        if not isinstance(sent, dict) or not any(p in sent for p in params):
            return request
        if "max_tokens" in params and "max_tokens" in sent:
            sent["max_completion_tokens"] = sent.pop("max_tokens")
        if "temperature" in params:
            sent.pop("temperature", None)
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
        return httpx2.Request(request.method, request.url, headers=headers,
                              content=json.dumps(sent).encode("utf-8"), extensions=request.extensions)

    def _inspect(self, request: httpx2.Request, reply: httpx2.Response, body: bytes) -> None:
        status = reply.status_code
        if status >= 400:
            text = body.decode("utf-8", "replace")
            sent = _json(request.content) or {}
            if status in (400, 422, 500) and sent.get("response_format") and any(
                    marker in text.lower() for marker in UNSUPPORTED_MARKERS):
                kind = (sent.get("response_format") or {}).get("type", "?")
                use = ("PATHRAG_LLM_MODE=md_json (it sends no response_format)" if kind == "json_object" else
                       "PATHRAG_LLM_MODE=json or md_json (llama.cpp and most local servers accept those)")
                error = UnsupportedRequest(
                    f"the server at {self.base_url} does not accept response_format {kind!r} "
                    f"(HTTP {status}: {redact(' '.join(text.split())[:200])}); set {use}")
                self.stop(error)
                raise error
            if status in (401, 403, 404):
                error = Refused(self._refusal(status, text, sent, request.url.path))
                self.stop(error)
                raise error
            if status == 429 and "insufficient_quota" in text:
                error = Refused(f"the server at {self.base_url} answered HTTP 429 insufficient_quota "
                                f"({redact(' '.join(text.split())[:160])}): the account behind "
                                f"{self.settings}_API_KEY has no quota left; add credit or use another key")
                self.stop(error)
                raise error
            if status >= 500:
                self._failed("http", f"HTTP {status}: {text[:200]}")
            elif status == 429:  # says nothing about the server's health, unless it never lifts
                self._rate_limited(text)
            else:
                self._succeeded()  # the server answered; 4xx are the request's fault, not the server's
            return
        path = request.url.path
        if not path.endswith(("/chat/completions", "/embeddings")):
            self._succeeded()
            return
        data = _json(body)
        if not isinstance(data, dict):
            # a 200 whose body is not a JSON object (cut off mid-reply, an HTML error page): a transport
            # fault like a dropped connection, retried; several in a row stop the client like 5xx do
            shown = " ".join(body[:80].decode("utf-8", "replace").split())
            detail = (f"the server at {self.base_url} answered HTTP 200 with {len(body)} bytes that are not a "
                      f"JSON object ({shown!r}...)")
            self._failed("malformed", detail)
            raise MalformedReply(detail)
        self._succeeded()
        usage = data.get("usage")
        if self.on_usage is not None and isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            self.on_usage(prompt if isinstance(prompt, int) else 0, completion if isinstance(completion, int) else 0)
        if path.endswith("/embeddings"):
            sent = (_json(request.content) or {}).get("input")
            expected = 1 if isinstance(sent, str) else len(sent or [])
            got = data.get("data")
            if isinstance(got, list) and len(got) != expected:
                raise EmptyReply(f"the server at {self.base_url} returned {len(got)} embeddings for "
                                 f"{expected} texts")
            return
        choices = data.get("choices")
        if isinstance(choices, list) and not choices:
            raise EmptyReply(f"the server at {self.base_url} answered with no choices")
        context: CallContext | None = getattr(self.context, "call", None)
        if context is None or not context.structured or not choices:
            return
        finish = choices[0].get("finish_reason") if isinstance(choices[0], dict) else None
        completion = (data.get("usage") or {}).get("completion_tokens")
        cap = context.max_tokens
        at_cap = cap is not None and isinstance(completion, int) and completion >= cap
        if finish == "length" or at_cap:
            raise OutputTruncated(
                f"the answer was cut at the output cap (finish_reason {finish!r}, {completion} completion "
                f"tokens, max_tokens {cap})", max_tokens=cap, completion_tokens=completion)


def env_proxy_for(url: str) -> str | None:
    """The proxy the environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) gives for ``url``, as httpx
    would pick it. httpx ignores the environment once a client has its own transport, so the transport
    is built with it instead."""
    from httpx2._urls import URL
    from httpx2._utils import URLPattern, get_environment_proxies

    target = URL(url)
    for pattern in sorted(URLPattern(key) for key in get_environment_proxies()):
        if pattern.matches(target):
            return get_environment_proxies()[pattern.pattern]
    return None


def _json(raw: bytes | None) -> Any:
    try:
        return json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError):
        return None
