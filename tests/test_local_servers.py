"""The LLM client against servers that behave like llama.cpp / Ollama (issue 11) and under the faults of
issue 10 items 6 and 7, over real HTTP against the test server."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.llm.client import (
    LLMClient,
    LLMStoppedError,
    LLMTruncatedError,
    LLMUnavailableError,
    LLMUnsupportedModeError,
    llm_from_settings,
)
from pathrag_lab.testing.openai_server import FakeOpenAIServer

SECRET = "sk-local-5ecret-never-shown-77aa"
MESSAGES = [
    {"role": "system", "content": "Extract entities and relations."},
    {"role": "user", "content": "Ada Lovelace wrote notes on the Analytical Engine."},
]
EXTRACTION = {"entities": [{"name": "Ada Lovelace", "type": "person", "description": "wrote notes"}],
              "relations": []}


def make_client(server: FakeOpenAIServer, **options) -> LLMClient:
    server.timeout_sleep = 1.5
    # generous by default (a loaded CI machine can take over 0.5 s to answer); timeout tests pass their own
    defaults = dict(api_key=SECRET, timeout=30.0, max_retries=2, validation_retries=2)
    return LLMClient(server.base_url, "fake-chat", **{**defaults, **options})


class _Collect(logging.Handler):
    """A handler on the root logger: sees what reaches the terminal through normal propagation."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(logging.Formatter("%(name)s %(message)s").format(r) for r in self.records)


@pytest.fixture
def root_records():
    handler = _Collect()
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old)


# ---- 11.1 output caps and truncation --------------------------------------------------------------

def test_every_request_carries_the_stage_output_cap(openai_server: FakeOpenAIServer) -> None:
    settings = Settings.from_env({"PATHRAG_LLM_BASE_URL": openai_server.base_url, "PATHRAG_LLM_MODEL": "m",
                                  "PATHRAG_LLM_MAX_TOKENS": "777", "PATHRAG_LLM_ANSWER_MAX_TOKENS": "55"})
    client = llm_from_settings(settings)
    assert client is not None
    openai_server.script_chat([json.dumps(EXTRACTION)])
    client.structured(MESSAGES, ChunkExtraction, stage="extract")
    client.complete(MESSAGES, stage="answer")
    sent = [r.body.get("max_tokens") for r in openai_server.requests_for("chat")]
    assert sent == [777, 55]


@pytest.mark.parametrize("mode", ["json", "md_json", "tools"])
def test_answer_cut_at_the_cap_is_truncation_not_output(openai_server: FakeOpenAIServer, mode: str) -> None:
    """finish_reason "length" (json modes) or a tool call cut at max_tokens that llama.cpp still reports as
    "tool_calls": either way one request, no re-asks of the same cut answer, a truncation error."""
    openai_server.runaway = True
    client = make_client(openai_server, mode=mode, max_tokens={"extract": 20})

    with pytest.raises(LLMTruncatedError) as info:
        client.structured(MESSAGES, ChunkExtraction, stage="extract")

    assert openai_server.count("chat") == 1
    body = openai_server.requests_for("chat")[0].body
    assert body["max_tokens"] == 20
    assert "PATHRAG_LLM_MAX_TOKENS" in str(info.value)
    # the cut answer's tokens are counted as the server reported them (issue 27: they were dropped)
    assert info.value.usage.completion_tokens == 20 and info.value.usage.prompt_tokens > 0
    assert client.usage_by_stage()["extract"].completion_tokens == 20


def test_free_text_answer_at_the_cap_is_kept_and_marked(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat(["one two three four five six seven eight"])
    client = make_client(openai_server, max_tokens={"answer": 3})
    result = client.complete(MESSAGES, stage="answer")
    assert result.truncated and result.text == "one two three"


# ---- 11.2 serial server, timeouts, the overall stop ------------------------------------------------

@pytest.mark.e2e
def test_serial_server_makes_the_client_back_off_and_stop_with_advice(openai_server: FakeOpenAIServer) -> None:
    """Every request takes longer than the timeout on a server serving one at a time: the client halves its
    concurrency, stops after ``stop_after`` failed attempts, and the calls still running or queued fail at
    once with a message that says what to set."""
    openai_server.serial = True
    openai_server.response_delay = 0.8
    client = make_client(openai_server, max_concurrency=4, max_retries=3, timeout=0.4)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.structured(MESSAGES, ChunkExtraction, stage="extract")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "calls did not stop"

    assert len(errors) == 8 and all(isinstance(e, LLMUnavailableError) for e in errors)
    assert any(isinstance(e, LLMStoppedError) for e in errors)
    assert client.concurrency_limit < 4
    message = client.stopped or ""
    assert "PATHRAG_LLM_MAX_CONCURRENCY=1" in message and "PATHRAG_LLM_TIMEOUT" in message
    # 8 calls x 4 attempts would be 32 requests; the stop cuts that short
    assert openai_server.count("chat") < 8 * 4


def test_stopped_client_fails_new_calls_without_a_request(openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("timeout", times=10)
    client = make_client(openai_server, max_retries=1, timeout=0.5)
    with pytest.raises(LLMUnavailableError):
        client.complete(MESSAGES, stage="answer")
    sent = openai_server.count("chat")
    with pytest.raises(LLMStoppedError, match="PATHRAG_LLM_TIMEOUT"):
        client.complete(MESSAGES, stage="answer")
    assert openai_server.count("chat") == sent


def test_unreachable_server_stop_says_is_the_server_up() -> None:
    server = FakeOpenAIServer().start()
    base_url = server.base_url
    server.stop()
    client = LLMClient(base_url, "fake-chat", timeout=0.5, max_retries=1)
    with pytest.raises(LLMUnavailableError):
        client.complete(MESSAGES)
    assert "is the server up" in (client.stopped or "")


def test_trickled_body_is_bounded_by_the_total_deadline(openai_server: FakeOpenAIServer) -> None:
    """Each byte comes quickly (no read times out) but the whole reply would take seconds: the request is
    cut at ``timeout`` and retried, and the retry's prompt answer is used."""
    openai_server.trickle_interval = 0.05  # a reply of some 300 bytes takes 15 s or more to arrive
    openai_server.inject("trickle", times=1)
    openai_server.script_chat([json.dumps(EXTRACTION), json.dumps(EXTRACTION)])
    client = make_client(openai_server, timeout=0.5)
    result = client.structured(MESSAGES, ChunkExtraction, stage="extract")
    assert result.value.entities[0].name == "Ada Lovelace"
    assert openai_server.count("chat") == 2  # read to its end, the first (trickled) reply would have served


def test_a_timed_out_request_is_left_to_finish_before_the_retry(openai_server: FakeOpenAIServer) -> None:
    """Issue 59: a one-slot server keeps working on a request the client gave up on. The retry waits until the
    server is done with it (the abandoned reply is read to its end in the background) instead of queueing a
    second request behind it: the server never holds two of this client's requests at once."""
    openai_server.serial = True
    openai_server.inject("timeout", times=1)          # stalls timeout_sleep (1.5 s), then hangs up
    openai_server.script_chat(["the answer"])
    client = make_client(openai_server, max_concurrency=1, max_retries=2, timeout=0.5)
    result = client.complete(MESSAGES, stage="answer")
    assert result.text == "the answer"
    assert openai_server.count("chat") == 2
    assert openai_server.max_in_flight == 1


# ---- 11.3 unsupported response_format ------------------------------------------------------------

@pytest.mark.parametrize(("mode", "rejected", "advice", "working"), [
    ("json_schema", "json_schema", "PATHRAG_LLM_MODE=json", "json"),  # llama.cpp
    ("json", "json_object", "PATHRAG_LLM_MODE=md_json", "md_json"),   # a server without response_format
])
def test_rejected_response_format_stops_at_once_naming_the_mode(openai_server: FakeOpenAIServer, mode: str,
                                                                rejected: str, advice: str, working: str) -> None:
    openai_server.unsupported_formats = {rejected}
    client = make_client(openai_server, mode=mode, max_retries=3)

    with pytest.raises(LLMUnsupportedModeError) as info:
        client.structured(MESSAGES, ChunkExtraction, stage="extract")
    assert openai_server.count("chat") == 1  # not retried as a transport fault
    assert advice in str(info.value) and rejected in str(info.value)
    with pytest.raises(LLMUnsupportedModeError):  # and the client stays stopped
        client.structured(MESSAGES, ChunkExtraction, stage="extract")
    assert openai_server.count("chat") == 1

    json_mode = make_client(openai_server, mode=working)  # the mode the message names works
    openai_server.script_chat([json.dumps(EXTRACTION)])
    assert json_mode.structured(MESSAGES, ChunkExtraction, stage="extract").value.entities


# ---- OpenAI reasoning models (o-series, GPT-5.x): max_completion_tokens, default temperature only ------------

def test_reasoning_model_refusals_are_learnt_once_and_the_cap_still_holds(openai_server: FakeOpenAIServer,
                                                                         root_records) -> None:
    openai_server.reasoning_model = True
    client = make_client(openai_server, max_tokens={"extract": 64, "*": 32})
    openai_server.script_chat([json.dumps(EXTRACTION)])

    first = client.structured(MESSAGES, ChunkExtraction, stage="extract")
    assert first.value.entities[0].name == "Ada Lovelace"
    sent = [r.body for r in openai_server.requests_for("chat")]
    assert len(sent) == 3 and first.usage.calls == 3  # refused twice (max_tokens, then temperature), resent
    assert "max_tokens" in sent[0] and sent[0]["temperature"] == 0.0
    assert sent[2]["max_completion_tokens"] == 64 and "max_tokens" not in sent[2] and "temperature" not in sent[2]

    answer = client.complete(MESSAGES, stage="answer")  # later calls go in the learnt form at once
    assert answer.usage.calls == 1 and openai_server.count("chat") == 4
    assert openai_server.requests_for("chat")[3].body["max_completion_tokens"] == 32
    warnings = [r.getMessage() for r in root_records.records
                if r.levelno == logging.WARNING and "refuses" in r.getMessage()]
    assert len(warnings) == 2 and "max_completion_tokens" in warnings[0] and "temperature" in warnings[1]
    assert SECRET not in root_records.text()

    # the cap sent as max_completion_tokens still cuts, and a cut structured answer is still refused
    openai_server.script_chat([json.dumps(EXTRACTION) + " " + "word " * 80])
    with pytest.raises(LLMTruncatedError):
        client.structured(MESSAGES, ChunkExtraction, stage="extract", validation_retries=0)


def test_an_answer_whose_cap_went_on_reasoning_names_the_setting(openai_server: FakeOpenAIServer) -> None:
    from pathrag_pipeline.llm.client import LLMOutputError

    client = make_client(openai_server)
    reply = openai_server._chat_body({"messages": MESSAGES}, "")
    reply["choices"][0]["finish_reason"] = "length"  # every completion token was reasoning; no text left
    openai_server.script_chat([reply])
    with pytest.raises(LLMOutputError, match="PATHRAG_LLM_ANSWER_MAX_TOKENS"):
        client.complete(MESSAGES, stage="answer")


def test_servers_that_accept_max_tokens_and_temperature_get_them_unchanged(openai_server: FakeOpenAIServer) -> None:
    client = make_client(openai_server, max_tokens=48)
    openai_server.script_chat([json.dumps(EXTRACTION)])
    client.structured(MESSAGES, ChunkExtraction, stage="extract")
    (body,) = [r.body for r in openai_server.requests_for("chat")]
    assert body["max_tokens"] == 48 and body["temperature"] == 0.0 and "max_completion_tokens" not in body


# ---- refusals for good: a wrong key (401), no access (403), an unknown model or route (404) ---------------------

@pytest.mark.parametrize(("fault", "names"), [
    ("401", "PATHRAG_LLM_API_KEY"),
    ("403", "PATHRAG_LLM_API_KEY"),
    ("404_model", "PATHRAG_LLM_MODEL"),
    ("404_route", "PATHRAG_LLM_BASE_URL"),
])
def test_refused_requests_stop_at_once_naming_the_setting(openai_server: FakeOpenAIServer, fault: str,
                                                          names: str) -> None:
    openai_server.inject(fault, times=10)
    client = make_client(openai_server, max_retries=3)

    with pytest.raises(LLMStoppedError) as info:
        client.structured(MESSAGES, ChunkExtraction, stage="extract")
    assert openai_server.count("chat") == 1  # not retried: no retry can fix a key, a model name or a URL
    assert names in str(info.value) and f"HTTP {fault[:3]}" in str(info.value)
    assert SECRET not in str(info.value)
    with pytest.raises(LLMStoppedError):  # later calls fail at once too, without a request
        client.complete(MESSAGES, stage="answer")
    assert openai_server.count("chat") == 1


# ---- 10.6 choices: [] -----------------------------------------------------------------------------

@pytest.mark.parametrize("call", ["structured", "complete"])
def test_empty_choices_are_retried(openai_server: FakeOpenAIServer, call: str) -> None:
    openai_server.inject("empty_choices", times=1)
    openai_server.script_chat([json.dumps(EXTRACTION)])
    client = make_client(openai_server)
    if call == "structured":
        assert client.structured(MESSAGES, ChunkExtraction).value.entities[0].name == "Ada Lovelace"
    else:
        assert "Ada Lovelace" in client.complete(MESSAGES).text
    assert openai_server.count("chat") == 2


def test_persistent_empty_choices_fail_as_unavailable(openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("empty_choices", times=10)
    client = make_client(openai_server, max_retries=1)
    with pytest.raises(LLMUnavailableError, match="no choices"):
        client.structured(MESSAGES, ChunkExtraction)
    assert openai_server.count("chat") == 2


# ---- 10.7 / 11.7 secrets and instructor's logging ---------------------------------------------------

def test_key_echoed_in_an_error_never_reaches_logs_or_errors(openai_server: FakeOpenAIServer,
                                                             root_records: _Collect) -> None:
    openai_server.inject("echo_key", times=20)
    client = make_client(openai_server, max_retries=1, stop_after=50)
    errors = []
    for call in (lambda: client.structured(MESSAGES, ChunkExtraction, stage="extract"),
                 lambda: client.complete(MESSAGES, stage="answer")):
        with pytest.raises(LLMUnavailableError) as info:
            call()
        errors.append(info.value)

    assert any(SECRET in (r.authorization or "") for r in openai_server.requests)  # it was echoed
    logged = root_records.text()
    assert "upstream rejected credentials" in logged  # the echo was logged (openai's debug) ...
    assert SECRET not in logged  # ... with the key masked
    for error in errors:
        assert "***" in str(error) and SECRET not in str(error) and SECRET not in error.last_error
        assert error.__cause__ is None or SECRET not in repr(error.__cause__)


def test_instructor_retry_lines_do_not_reach_the_terminal(openai_server: FakeOpenAIServer,
                                                          root_records: _Collect) -> None:
    openai_server.inject("500", times=2)
    openai_server.script_chat(["not json", json.dumps(EXTRACTION)])
    client = make_client(openai_server)
    client.structured(MESSAGES, ChunkExtraction, stage="extract")

    noisy = [r for r in root_records.records if r.name.startswith("instructor") and r.levelno >= logging.WARNING]
    assert noisy == []
    routed = [r for r in root_records.records if r.name == "pathrag_pipeline.llm" and "instructor:" in r.getMessage()]
    assert routed and all(r.levelno == logging.DEBUG for r in routed)


def test_environment_proxy_is_kept_with_the_guarded_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx ignores HTTPS_PROXY once a client has its own transport: the transport takes it instead."""
    from pathrag_pipeline.llm.transport import GuardedTransport, env_proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert env_proxy_for("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert env_proxy_for("http://127.0.0.1:8000/v1") is None
    proxied = GuardedTransport(timeout=1, max_concurrency=1, stop_after=1, base_url="https://api.openai.com/v1")
    assert "proxy" in type(proxied._pool).__name__.lower()
