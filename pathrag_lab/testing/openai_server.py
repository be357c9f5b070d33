"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the tests and the LLM-mode benchmark.

Why a real server: openai 3.x sends requests through ``httpx2``, which mocking libraries such as respx do
not patch. A local server exercises the whole client stack (openai retries, timeouts, instructor parsing and
re-asks) exactly as a vLLM/Ollama/llama.cpp endpoint would, with no network and no model.

Scripting, in the order the server consults it for each request:

1. injected faults (``inject("429" | "500" | "503" | "timeout" | "malformed" | "cut_body" | "disconnect", times, endpoint)``),
2. scripted responses (``script_chat([...])`` / ``script_embed([...])``), consumed first-in first-out,
3. the responder (``chat_responder(request_json)`` / ``embed_responder(texts, model)``).

A chat response item is either a ``str`` (the message content; for a ``tools`` request it becomes
``tool_calls[0].function.arguments``), a pydantic model (dumped to JSON content), or a ``dict`` (the full
response body, sent as is). An embedding response item is a list of vectors or a ``dict`` body.

Every request is recorded (endpoint, JSON body, headers) so tests can count calls, inspect what instructor
sent, and check that an ``Authorization`` header arrived. The server also tracks the largest number of
requests in flight at once, so tests can check a client's concurrency bound; ``response_delay`` makes
requests overlap long enough for that to be observable.

Behaviours of real local servers (llama-cpp-python's server, Ollama), off by default:

- ``serial = True``: one request is processed at a time, the others wait in the server's queue (their
  client-side timeout runs meanwhile), as llama.cpp serves by default;
- no default output cap: an answer is cut only when the request sends ``max_tokens`` (words stand for
  tokens); a cut answer reports ``finish_reason: "length"``, or ``"tool_calls"`` for a tools request, as
  llama.cpp does. ``runaway = True`` makes the model loop: without ``max_tokens`` it generates until
  ``timeout_sleep`` passes (its context is full), with it the answer is cut at the cap;
- ``unsupported_formats = {"json_schema"}``: such a ``response_format`` gets HTTP 500 with llama.cpp's body
  ("Input should be 'text' or 'json_object'");
- ``reasoning_model = True``: as OpenAI's o-series and GPT-5.x models, a request with ``max_tokens`` gets
  HTTP 400 ``unsupported_parameter`` ("Use 'max_completion_tokens' instead") and one with a ``temperature``
  other than 1 gets HTTP 400 ``unsupported_value``, with OpenAI's bodies; ``max_completion_tokens`` caps the
  answer like ``max_tokens``;
- ``schema_echo(request)``: what a weak model answers in json/md_json mode, the JSON schema it was shown;
- faults ``trickle`` (the body dribbles out a byte every ``trickle_interval`` s), ``cut_body`` (HTTP 200 with the reply
  cut off halfway), ``empty_choices``
  (``choices: []``), ``echo_key`` (HTTP 500 whose message repeats the request's Authorization header, as
  some proxies do), ``quota`` (OpenAI's HTTP 429 insufficient_quota), ``401`` / ``403`` / ``404_model`` (OpenAI's bodies for a wrong key, no access, an unknown
  model) and ``404_route`` (a plain 404, as for a base URL without ``/v1``), and for embeddings ``empty_data`` (``data: []``) and ``short`` (one vector too few).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

FAULTS = ("429", "quota", "500", "503", "timeout", "malformed", "cut_body", "disconnect", "trickle", "empty_choices", "echo_key",
          "empty_data", "short", "401", "403", "404_model", "404_route")
UNSUPPORTED_FORMAT_BODY = {"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"],
                                       "msg": "Input should be 'text' or 'json_object'",
                                       "input": "json_schema", "ctx": {"expected": "'text' or 'json_object'"}}]}
ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings", "/v1/models": "models"}

ChatResponder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
EmbedResponder = Callable[[list[str], str], list[list[float]]]


@dataclass(frozen=True)
class RecordedRequest:
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str] = field(repr=False)

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


def hash_embedding(text: str, dim: int = 8) -> list[float]:
    """A deterministic unit vector derived from the text's SHA-256: same text, same vector, no model."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    while len(digest) < dim:
        digest += hashlib.sha256(digest).digest()
    raw = [(b / 127.5) - 1.0 for b in digest[:dim]]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


def _word_count(value: Any) -> int:
    """Rough token count for usage figures: whitespace words of every string in the value.

    Chat prompts count only message contents, so tests can predict the figure from their messages."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_word_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(_word_count(v) for v in value)
    return 0


def default_chat_responder(request: dict[str, Any]) -> str:
    """Structured requests (tools, response_format or a JSON-schema system prompt) get ``{}``; others an echo."""
    messages = request.get("messages") or []
    structured = bool(request.get("tools") or request.get("response_format")) or any(
        "json" in str(m.get("content", "")).lower() for m in messages if m.get("role") == "system"
    )
    if structured:
        return "{}"
    last_user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"echo: {last_user}"


def schema_echo(request: dict[str, Any]) -> str:
    """A weak model's answer in json/md_json mode: the JSON schema from its prompt, repeated (title, type,
    properties), or a minimal echo when the prompt carries none."""
    for message in request.get("messages") or []:
        content = str(message.get("content") or "")
        start = content.find('{\n  "$defs"')
        if start < 0:
            start = content.find('{"$defs"')
        if start >= 0:
            depth = 0
            for i, ch in enumerate(content[start:], start):
                depth += ch == "{"
                depth -= ch == "}"
                if depth == 0:
                    schema = json.loads(content[start:i + 1])
                    return json.dumps({k: v for k, v in schema.items() if k != "$defs"})
    return json.dumps({"title": "ChunkExtraction", "type": "object"})


def reasoning_model_refusal(request: dict[str, Any]) -> dict[str, Any] | None:
    """OpenAI's 400 body for a parameter its reasoning models refuse, or None when the request is accepted."""
    if "max_tokens" in request:
        return {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                     "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                          "param": "max_tokens", "code": "unsupported_parameter"}}
    if request.get("temperature", 1) != 1:
        return {"error": {"message": f"Unsupported value: 'temperature' does not support {request['temperature']} "
                                     "with this model. Only the default (1) value is supported.",
                          "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}
    return None


def default_embed_responder(texts: list[str], model: str) -> list[list[float]]:
    return [hash_embedding(t) for t in texts]


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    _body: dict[str, Any]
    _in_flight = False

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the connection was cut on purpose ("disconnect") or by the client

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request stderr logging; the fake records requests itself."""

    def do_GET(self) -> None:
        self._handle(body={})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        self._handle(body=body)

    def _handle(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        endpoint = ENDPOINTS.get(self.path.split("?")[0].rstrip("/"))
        if endpoint is None:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        self._body = body
        self._in_flight = True
        fake._enter(endpoint, body, {k.lower(): v for k, v in self.headers.items()})
        serial = fake._serial_lock if (fake.serial and endpoint != "models") else None
        if serial is not None:
            serial.acquire()  # llama.cpp: one request at a time, the rest wait in the server's queue
        fake._start_processing()
        try:
            fault = fake._take_fault(endpoint)
            if fault is not None:
                self._send_fault(fault, endpoint)
                return
            if (endpoint == "chat" and fake.unsupported_formats
                    and (body.get("response_format") or {}).get("type") in fake.unsupported_formats):
                self._send_json(500, UNSUPPORTED_FORMAT_BODY)
                return
            refusal = reasoning_model_refusal(body) if endpoint == "chat" and fake.reasoning_model else None
            if refusal is not None:
                self._send_json(400, refusal)
                return
            if fake.response_delay:
                fake._stopping.wait(fake.response_delay)
            if endpoint == "chat":
                self._send_json(200, fake._chat_response(body))
            elif endpoint == "embeddings":
                self._send_json(200, fake._embed_response(body))
            else:
                self._send_json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in fake.models
                ]})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired); nothing left to answer
        except Exception as exc:  # a broken responder in a test: make it visible to the client
            self._send_json(500, {"error": {"message": f"fake server responder failed: {exc!r}",
                                            "type": "responder_error"}})
        finally:
            self._done()
            fake._stop_processing()
            if serial is not None:
                serial.release()

    def _done(self) -> None:
        """Leave the in-flight count once, before the answer is written: a client that bounds its
        concurrency may send its next request the moment it reads this answer."""
        if self._in_flight:
            self._in_flight = False
            self.server.fake._leave()

    def _send_fault(self, fault: str, endpoint: str) -> None:
        fake = self.server.fake
        if fault == "429":
            self._send_json(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                            headers={"Retry-After": fake.retry_after})
        elif fault == "quota":   # OpenAI's reply when the account has no credit left
            self._send_json(429, {"error": {"message": "You exceeded your current quota, please check your plan "
                                                       "and billing details.", "type": "insufficient_quota",
                                            "param": None, "code": "insufficient_quota"}})
        elif fault == "401":
            self._send_json(401, {"error": {"message": "Incorrect API key provided: sk-wr***key. You can find your "
                                                       "API key at https://platform.openai.com/account/api-keys.",
                                            "type": "invalid_request_error", "param": None,
                                            "code": "invalid_api_key"}})
        elif fault == "403":
            self._send_json(403, {"error": {"message": "You are not allowed to sample from this model",
                                            "type": "invalid_request_error", "param": None, "code": None}})
        elif fault == "404_model":
            model = self._body.get("model")
            self._send_json(404, {"error": {"message": f"The model `{model}` does not exist or you do not have "
                                                       "access to it.", "type": "invalid_request_error",
                                            "param": None, "code": "model_not_found"}})
        elif fault == "404_route":
            self._send_json(404, {"detail": "Not Found"})
        elif fault in ("500", "503"):
            self._send_json(int(fault), {"error": {"message": f"injected {fault}", "type": "server_error"}})
        elif fault == "timeout":
            # Stall past the client's timeout, then hang up; scripted answers stay queued for the retry.
            fake._stopping.wait(fake.timeout_sleep)
            self.close_connection = True
        elif fault == "malformed":
            if endpoint == "chat":
                self._send_json(200, fake._chat_body(self._body, "this is not JSON {"))
            else:
                self._send_raw(200, b"{not json", "application/json")
        elif fault == "disconnect":
            self._done()
            self.close_connection = True
            self.connection.shutdown(2)  # socket.SHUT_RDWR: no status line, no body
        elif fault == "trickle":
            # A complete, valid answer whose bytes arrive slowly: each read is quick, the whole takes long.
            payload = fake._chat_response(self._body) if endpoint == "chat" else fake._embed_response(self._body)
            data = json.dumps(payload).encode("utf-8")
            self._done()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(len(data)):
                if fake._stopping.wait(fake.trickle_interval):
                    return
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
        elif fault == "empty_choices":
            body = fake._chat_body(self._body, "{}")
            body["choices"] = []
            self._send_json(200, body)
        elif fault == "echo_key":
            key = self.headers.get("Authorization", "")
            self._send_json(500, {"error": {"message": f"upstream rejected credentials {key}",
                                            "type": "server_error"}})
        elif fault == "cut_body":   # HTTP 200, the real JSON reply cut off halfway (a proxy or server dying)
            payload = fake._chat_response(self._body) if endpoint == "chat" else fake._embed_response(self._body)
            data = json.dumps(payload).encode("utf-8")
            self._send_raw(200, data[: len(data) // 2], "application/json")
        elif fault in ("empty_data", "short"):
            payload = fake._embed_response(self._body)
            payload["data"] = [] if fault == "empty_data" else payload["data"][:-1]
            self._send_json(200, payload)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self._done()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeOpenAIServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (timeouts, injected disconnects) are expected here: stay quiet."""


class FakeOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 (free port) with scripted answers, faults and call records."""

    def __init__(self, *, models: list[str] | None = None) -> None:
        self.models = models or ["fake-chat", "fake-embed"]
        self.chat_responder: ChatResponder = default_chat_responder
        self.embed_responder: EmbedResponder = default_embed_responder
        self.timeout_sleep = 3.0  # seconds a "timeout" fault stalls; set above the client's timeout
        self.response_delay = 0.0  # seconds every normal answer waits (lets concurrency become visible)
        self.retry_after = "0"  # Retry-After header value on injected 429s
        self.serial = False  # process one request at a time (llama.cpp's default)
        self.runaway = False  # without max_tokens the model never stops (stalls timeout_sleep s)
        self.unsupported_formats: set[str] = set()  # response_format types answered with llama.cpp's 500
        self.reasoning_model = False  # refuse max_tokens and temperature != 1 as OpenAI's reasoning models do
        self.trickle_interval = 0.05  # seconds between the bytes of a "trickle" fault
        self._serial_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._faults: dict[str, deque[str]] = {e: deque() for e in ENDPOINTS.values()}
        self._chat_script: deque[Any] = deque()
        self._embed_script: deque[Any] = deque()
        self._in_flight = 0
        self.max_in_flight = 0
        self._processing = 0
        self.max_processing = 0  # the most requests being answered at once (1 when serial)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "FakeOpenAIServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # wakes handlers stalled in a "timeout" fault
        self._httpd.shutdown()
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started; call start() or use it as a context manager")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- scripting -----------------------------------------------------------------------------
    def inject(self, fault: str, times: int = 1, endpoint: str = "chat") -> None:
        """Make the next ``times`` requests to ``endpoint`` fail with ``fault`` (faults come before scripts)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; use one of {', '.join(FAULTS)}")
        if endpoint not in self._faults:
            raise ValueError(f"unknown endpoint {endpoint!r}; use one of {', '.join(self._faults)}")
        with self._lock:
            self._faults[endpoint].extend([fault] * times)

    def clear_faults(self) -> None:
        """Drop the injected faults not yet served (a client that stopped early leaves some queued)."""
        with self._lock:
            for queue in self._faults.values():
                queue.clear()

    def script_chat(self, responses: list[Any]) -> None:
        """Queue chat answers (content str, pydantic model, or full response dict), used before the responder."""
        with self._lock:
            self._chat_script.extend(responses)

    def script_embed(self, responses: list[Any]) -> None:
        """Queue embedding answers (list of vectors per request, or full response dict)."""
        with self._lock:
            self._embed_script.extend(responses)

    def reset(self) -> None:
        """Forget records, faults and scripts (responders and settings stay)."""
        with self._lock:
            self._requests.clear()
            for queue in self._faults.values():
                queue.clear()
            self._chat_script.clear()
            self._embed_script.clear()
            self.max_in_flight = 0
            self.max_processing = 0

    # ---- records -------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(r.endpoint, r.body) for r in self.requests]

    def requests_for(self, endpoint: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.endpoint == endpoint]

    def count(self, endpoint: str | None = None) -> int:
        """Requests received for ``endpoint`` ("chat", "embeddings", "models"), or all when None."""
        return len(self.requests if endpoint is None else self.requests_for(endpoint))

    @property
    def authorizations(self) -> list[str | None]:
        """The Authorization header of each request, in order (None where none was sent)."""
        return [r.authorization for r in self.requests]

    # ---- internals used by the handler ---------------------------------------------------------
    def _enter(self, endpoint: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(endpoint, body, headers))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _start_processing(self) -> None:
        with self._lock:
            self._processing += 1
            self.max_processing = max(self.max_processing, self._processing)

    def _stop_processing(self) -> None:
        with self._lock:
            self._processing -= 1

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _take_fault(self, endpoint: str) -> str | None:
        with self._lock:
            queue = self._faults[endpoint]
            return queue.popleft() if queue else None

    def _next_chat(self, body: dict[str, Any]) -> Any:
        with self._lock:
            if self._chat_script:
                return self._chat_script.popleft()
        return self.chat_responder(body)

    def _chat_response(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._next_chat(body)
        if isinstance(answer, dict):
            return answer
        if hasattr(answer, "model_dump_json"):
            answer = answer.model_dump_json()
        return self._chat_body(body, str(answer))

    def _chat_body(self, request: dict[str, Any], content: str) -> dict[str, Any]:
        """An OpenAI chat.completion body; a ``tools`` request gets the content as a tool call's arguments.

        Words stand for tokens: a request's ``max_tokens`` cuts the content at that many words (no cap when
        it sends none) and the answer reports ``finish_reason: "length"`` (``"tool_calls"`` for tools)."""
        cap = request.get("max_tokens", request.get("max_completion_tokens"))
        finish_reason = "stop"
        if self.runaway:
            if cap is None:
                self._stopping.wait(self.timeout_sleep)  # generates until the context is full
                cap = 2_000
            content = (content + " ") + " ".join(["{\"entities\": ["] * (cap + 1))
        if isinstance(cap, int) and _word_count(content) > cap:
            content = " ".join(content.split()[:cap])
            finish_reason = "length"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        tools = request.get("tools")
        if tools:
            choice = request.get("tool_choice")
            name = (choice.get("function", {}).get("name") if isinstance(choice, dict) else None) or \
                tools[0].get("function", {}).get("name", "tool")
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(self._requests)}", "type": "function",
                "function": {"name": name, "arguments": content},
            }]}
            finish_reason = "tool_calls"  # llama.cpp says so even when max_tokens cut the call
        prompt_tokens = sum(_word_count(m.get("content")) for m in request.get("messages") or [])
        completion_tokens = _word_count(content)
        return {
            "id": f"chatcmpl-fake-{len(self._requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.models[0],
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _embed_response(self, body: dict[str, Any]) -> dict[str, Any]:
        raw_input = body.get("input", [])
        texts = [raw_input] if isinstance(raw_input, str) else [str(t) for t in raw_input]
        model = body.get("model") or self.models[-1]
        with self._lock:
            scripted = self._embed_script.popleft() if self._embed_script else None
        vectors = scripted if scripted is not None else self.embed_responder(texts, model)
        if isinstance(vectors, dict):
            return vectors
        as_base64 = body.get("encoding_format") == "base64"  # the openai client asks for base64 by default
        data = []
        for index, vector in enumerate(vectors):
            if as_base64:
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding: Any = base64.b64encode(packed).decode("ascii")
            else:
                embedding = list(vector)
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = _word_count(texts)
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
