"""LLMClient over real HTTP against the fake OpenAI-compatible server: parsing, retries, usage, limits, secrets."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.llm.client import (
    OPENAI_BASE_URL,
    LLMClient,
    LLMOutputError,
    LLMUnavailableError,
    Usage,
    llm_from_settings,
)
from pathrag_lab.testing.openai_server import FakeOpenAIServer

SECRET = "sk-test-5ecret-do-not-log-8c1f"
MESSAGES = [
    {"role": "system", "content": "Extract entities and relations."},
    {"role": "user", "content": "Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage."},
]
EXTRACTION = {
    "entities": [
        {"name": "Ada Lovelace", "type": "person", "description": "wrote notes"},
        {"name": "Analytical Engine", "type": "work", "description": "a machine"},
    ],
    "relations": [
        {"source": "Ada Lovelace", "target": "Analytical Engine", "keywords": "notes", "strength": 8},
    ],
}


FAULT_TIMEOUT = 0.5  # the client's timeout in tests of the timeout fault: the server stalls 1.5 s, longer than this


def make_client(server: FakeOpenAIServer, **options) -> LLMClient:
    """A generous timeout by default: on a loaded CI machine an ordinary reply can take longer than 0.5 s, the first
    request then times out after the server has consumed the scripted reply, and the retry gets the default ``{}``.
    Tests of the timeout fault pass ``timeout=FAULT_TIMEOUT``; the server stalls a little longer than that."""
    server.timeout_sleep = 1.5
    defaults = dict(api_key=SECRET, timeout=30.0, max_retries=2, validation_retries=2)
    return LLMClient(server.base_url, "fake-chat", **{**defaults, **options})


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema", "md_json"])
def test_structured_output_is_parsed_into_the_model(openai_server: FakeOpenAIServer, mode: str) -> None:
    openai_server.script_chat([json.dumps(EXTRACTION)])
    client = make_client(openai_server, mode=mode)

    result = client.structured(MESSAGES, ChunkExtraction, stage="extract")

    assert result.value == ChunkExtraction.model_validate(EXTRACTION)
    assert result.usage.calls == openai_server.count("chat") == 1
    request = openai_server.requests_for("chat")[0].body
    assert request["model"] == "fake-chat"
    if mode == "tools":
        assert request["tools"][0]["function"]["parameters"]["properties"].keys() >= {"entities", "relations"}
    if mode in ("json", "md_json"):  # the schema travels in the system message
        assert "relations" in request["messages"][0]["content"]


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema", "md_json"])
def test_the_response_model_instructor_sends_is_built_once_and_sends_what_it_built_each_time(
        openai_server: FakeOpenAIServer, monkeypatch, mode: str) -> None:
    """``client._schema_model``: instructor's wrapper of the response model and its JSON schema, made once per model;
    the request is byte for byte the one instructor builds from the bare model, and the answer parses the same."""
    from pathrag_pipeline.llm import client as client_module

    from pydantic import BaseModel, Field

    class Named(BaseModel):
        """The people the text names."""   # a docstring and a field description travel in the schema

        names: list[str] = Field(description="each person's full name")

    assert client_module._schema_model(ChunkExtraction) is client_module._schema_model(ChunkExtraction)
    client = make_client(openai_server, mode=mode)
    for model, reply in ((ChunkExtraction, EXTRACTION), (Named, {"names": ["Ada Lovelace"]})):
        openai_server.reset()
        openai_server.script_chat([json.dumps(reply)] * 2)
        with monkeypatch.context() as patch:
            kept = client.structured(MESSAGES, model, stage="extract")
            patch.setattr(client_module, "_schema_model", lambda m: m)   # instructor's own, built per call
            built = client.structured(MESSAGES, model, stage="extract")
        first, second = (json.dumps(r.body) for r in openai_server.requests_for("chat"))
        assert first == second
        assert kept.value == built.value == model.model_validate(reply)
        assert type(kept.value) is model


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema", "md_json"])
def test_a_structured_request_posted_as_given_is_the_one_the_sdks_create_sends(
        openai_server: FakeOpenAIServer, monkeypatch, mode: str) -> None:
    """``client._post_structured_requests``: instructor's structured request, sent by ``post`` as built, has the body
    and headers the SDK's ``chat.completions.create`` sends, and its reply parses the same; a streamed request still
    goes through ``create``."""
    from pathrag_pipeline.llm import client as client_module

    posted = make_client(openai_server, mode=mode)
    monkeypatch.setattr(client_module, "_post_structured_requests", lambda client: None)
    by_create = make_client(openai_server, mode=mode)
    openai_server.script_chat([json.dumps(EXTRACTION)] * 2)
    values = [c.structured(MESSAGES, ChunkExtraction, stage="extract").value for c in (posted, by_create)]
    first, second = openai_server.requests_for("chat")
    assert first.body == second.body and values[0] == values[1] == ChunkExtraction.model_validate(EXTRACTION)
    assert {k: v for k, v in first.headers.items() if not k.startswith("x-stainless")} == \
        {k: v for k, v in second.headers.items() if not k.startswith("x-stainless")}
    openai_server.script_chat(["plain"])   # an argument only the SDK's create understands goes through it
    posted._openai.chat.completions.create(model="fake-chat", messages=MESSAGES, extra_headers={"X-Probe": "1"})
    probe = openai_server.requests_for("chat")[-1]
    assert {k.lower(): v for k, v in probe.headers.items()}.get("x-probe") == "1" and "extra_headers" not in probe.body


@pytest.mark.parametrize("fault", ["429", "500", "503", "timeout", "disconnect"])
def test_transport_fault_is_retried_and_succeeds(openai_server: FakeOpenAIServer, fault: str) -> None:
    openai_server.inject(fault, times=1)
    openai_server.script_chat([json.dumps(EXTRACTION)])
    client = make_client(openai_server, **({"timeout": FAULT_TIMEOUT} if fault == "timeout" else {}))

    result = client.structured(MESSAGES, ChunkExtraction, stage="extract")

    assert result.value.relations[0].target == "Analytical Engine"
    assert openai_server.count("chat") == 2
    assert (result.usage.calls, result.usage.retries) == (2, 1)


def test_persistent_transport_fault_raises_unavailable(openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("503", times=10)
    client = make_client(openai_server, max_retries=1)

    with pytest.raises(LLMUnavailableError) as info:
        client.structured(MESSAGES, ChunkExtraction, stage="extract")

    err = info.value
    assert openai_server.count("chat") == 2  # first try + one transport retry, no re-asks
    assert (err.stage, err.model, err.usage.calls) == ("extract", "fake-chat", 2)
    assert "503" in err.last_error and "extract" in str(err)


def test_unreachable_endpoint_raises_unavailable_for_complete() -> None:
    server = FakeOpenAIServer().start()
    base_url = server.base_url
    server.stop()  # nothing listens on that port any more
    client = LLMClient(base_url, "fake-chat", timeout=0.5, max_retries=0)

    with pytest.raises(LLMUnavailableError, match="answer"):
        client.complete(MESSAGES, stage="answer")


def test_invalid_output_is_reasked_with_the_error(openai_server: FakeOpenAIServer) -> None:
    blank_name = {"entities": [{"name": "   "}], "relations": []}  # valid JSON, fails the name validator
    openai_server.script_chat([json.dumps(blank_name), json.dumps(EXTRACTION)])
    client = make_client(openai_server)

    result = client.structured(MESSAGES, ChunkExtraction, stage="extract")

    assert len(result.value.entities) == 2
    assert openai_server.count("chat") == 2
    reask = openai_server.requests_for("chat")[1].body["messages"]
    assert len(reask) > len(openai_server.requests_for("chat")[0].body["messages"])
    assert "entity name must not be empty" in json.dumps(reask)
    assert (result.usage.calls, result.usage.retries) == (2, 1)


@pytest.mark.parametrize("mode", ["json", "tools"])
def test_persistently_malformed_output_raises_output_error(openai_server: FakeOpenAIServer, mode: str) -> None:
    openai_server.inject("malformed", times=10)
    client = make_client(openai_server, mode=mode, validation_retries=2)

    with pytest.raises(LLMOutputError) as info:
        client.structured(MESSAGES, ChunkExtraction, stage="extract")

    assert openai_server.count("chat") == 3  # first answer + 2 re-asks
    assert info.value.usage.calls == 3
    assert info.value.usage.completion_tokens > 0
    assert client.usage_by_stage()["extract"].calls == 3


def test_complete_returns_text_and_usage(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat(["Ada Lovelace wrote the notes."])
    client = make_client(openai_server)

    result = client.complete(MESSAGES, stage="answer")

    assert result.text == "Ada Lovelace wrote the notes."
    assert result.usage.completion_tokens == 5  # the fake counts whitespace words
    assert result.usage.prompt_tokens == sum(len(m["content"].split()) for m in MESSAGES)


def test_usage_totals_add_up_per_stage(openai_server: FakeOpenAIServer) -> None:
    client = make_client(openai_server)
    openai_server.script_chat([json.dumps(EXTRACTION), "not json", json.dumps(EXTRACTION)])
    openai_server.inject("500", times=1)

    results = [
        client.structured(MESSAGES, ChunkExtraction, stage="extract"),  # 500, retry, ok: 2 requests
        client.structured(MESSAGES, ChunkExtraction, stage="extract"),  # bad, re-ask, ok: 2 requests
        client.complete(MESSAGES, stage="answer"),
        client.complete(MESSAGES, stage="answer"),
    ]

    by_stage = client.usage_by_stage()
    assert by_stage["extract"] == results[0].usage + results[1].usage
    assert by_stage["answer"] == results[2].usage + results[3].usage
    assert by_stage["extract"].calls == 4 and by_stage["extract"].retries == 2
    assert client.total_usage().calls == openai_server.count("chat") == 6
    assert client.total_usage().total_tokens == sum(u.total_tokens for u in by_stage.values()) > 0


def test_concurrency_bound_holds_for_map_and_for_own_threads(openai_server: FakeOpenAIServer) -> None:
    openai_server.response_delay = 0.15  # long enough for requests to overlap when allowed to
    client = make_client(openai_server, max_concurrency=2)

    texts = client.map(lambda i: client.complete([{"role": "user", "content": f"q{i}"}]).text, range(6))
    assert texts == [f"echo: q{i}" for i in range(6)]
    assert openai_server.max_in_flight == 2

    openai_server.reset()
    threads = [threading.Thread(target=client.complete, args=(MESSAGES,)) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert openai_server.count("chat") == 5
    assert openai_server.max_in_flight == 2


def test_api_key_is_sent_but_never_shown(openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, openai's and httpx's request logging included
    # stop_after: the faults below must reach each call, not stop the client after the first one
    client = make_client(openai_server, max_retries=1, validation_retries=1, stop_after=20)
    openai_server.script_chat([json.dumps(EXTRACTION), "not JSON"])

    client.structured(MESSAGES, ChunkExtraction, stage="extract")
    client.complete(MESSAGES, stage="answer")
    openai_server.inject("500", times=5)
    with pytest.raises(LLMUnavailableError) as unavailable:
        client.complete(MESSAGES)
    openai_server.reset()
    openai_server.inject("malformed", times=5)
    with pytest.raises(LLMOutputError) as invalid:
        client.structured(MESSAGES, ChunkExtraction)

    assert set(openai_server.authorizations) == {f"Bearer {SECRET}"}
    assert any("Request options" in r.getMessage() for r in caplog.records), "openai debug logging not captured"
    shown = [repr(client), str(client.identity), str(unavailable.value), str(invalid.value), caplog.text]
    for text in shown:
        assert SECRET not in text


def test_key_echoed_by_the_endpoint_is_redacted_from_errors(openai_server: FakeOpenAIServer) -> None:
    openai_server.chat_responder = lambda request: f"the key was {SECRET}"
    client = make_client(openai_server, validation_retries=0)

    with pytest.raises(LLMOutputError) as info:
        client.structured(MESSAGES, ChunkExtraction)

    assert "the key was ***" in info.value.last_error
    assert SECRET not in str(info.value) and SECRET not in info.value.last_error


def test_keyless_local_endpoint_gets_placeholder_key(openai_server: FakeOpenAIServer) -> None:
    client = LLMClient(openai_server.base_url, "fake-chat", timeout=1.0)
    client.complete(MESSAGES)
    assert openai_server.authorizations == ["Bearer not-needed"]


def test_identity_strips_credentials_from_base_url() -> None:
    client = LLMClient("http://user:pw@localhost:8000/v1/", "m", api_key=SECRET, mode="tools")
    assert client.identity == {
        "provider": "openai-compatible", "base_url": "http://localhost:8000/v1", "model": "m", "mode": "tools",
    }
    assert "pw" not in repr(client)


@pytest.mark.parametrize(
    ("options", "named"),
    [({"mode": "xml"}, "'xml'"), ({"timeout": 0}, "timeout"), ({"max_concurrency": 0}, "max_concurrency")],
)
def test_bad_configuration_is_named(options: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        LLMClient("http://localhost:8000/v1", "m", **options)


def test_bad_base_url_is_named() -> None:
    with pytest.raises(ConfigError, match="localhost:8000"):
        LLMClient("localhost:8000", "m")


def test_llm_from_settings() -> None:
    assert llm_from_settings(Settings.from_env({})) is None

    local = llm_from_settings(Settings.from_env({"PATHRAG_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
                                                 "PATHRAG_LLM_MODEL": "qwen"}), mode="md_json")
    assert local is not None and local.identity["model"] == "qwen" and local.mode == "md_json"

    # A key alone configures nothing: the pipeline stays offline.
    assert llm_from_settings(Settings.from_env({"OPENAI_API_KEY": SECRET})) is None
    official = llm_from_settings(Settings.from_env({"OPENAI_API_KEY": SECRET, "PATHRAG_LLM_MODEL": "gpt-4o-mini"}))
    assert official is not None
    assert (official.base_url, official.model) == (OPENAI_BASE_URL, "gpt-4o-mini")
    assert SECRET not in repr(official)

    with pytest.raises(ConfigError, match="PATHRAG_LLM_MODEL"):
        llm_from_settings(Settings.from_env({"PATHRAG_LLM_BASE_URL": "http://127.0.0.1:11434/v1"}))
    with pytest.raises(ConfigError, match="PATHRAG_LLM_BASE_URL"):
        llm_from_settings(Settings.from_env({"PATHRAG_LLM_MODEL": "qwen"}))


def test_usage_addition() -> None:
    assert Usage(1, 2, 3, 0) + Usage(2, 5, 7, 1) == Usage(3, 7, 10, 1)


def test_transports_share_one_verifying_context_per_ca_setting(monkeypatch):
    """Making httpx's verifying context loads the CA bundle (~60 ms); every run made two transports, so the context
    is made once per process and per SSL_CERT_FILE/SSL_CERT_DIR, and a transport given its own keeps it."""
    import ssl

    import certifi

    from pathrag_pipeline.llm.transport import GuardedTransport

    def make(**kwargs):
        return GuardedTransport(timeout=1, max_concurrency=1, stop_after=1, base_url="http://127.0.0.1:9", **kwargs)

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    shared = make()._pool._ssl_context
    assert make()._pool._ssl_context is shared and shared.verify_mode == ssl.CERT_REQUIRED
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert make()._pool._ssl_context is not shared   # another CA setting: its own context
    own = ssl.create_default_context()
    assert make(verify=own)._pool._ssl_context is own


def test_attempts_reuse_a_runner_thread(openai_server: FakeOpenAIServer, monkeypatch) -> None:
    """Each HTTP attempt runs in a thread of its own so that its caller can give up at the deadline; starting an OS
    thread per attempt cost a tenth of a one-call query on a busy 2-core machine, so a runner that finished its
    attempt takes the next one."""
    from pathrag_pipeline.llm import transport

    ran_in: list[threading.Thread] = []
    exchange = transport.GuardedTransport._exchange

    def recording(self, request):
        ran_in.append(threading.current_thread())
        return exchange(self, request)

    monkeypatch.setattr(transport.GuardedTransport, "_exchange", recording)
    openai_server.script_chat(["one", "two", "three"])
    client = make_client(openai_server)
    for _ in range(3):
        client.complete(MESSAGES, stage="answer")
    assert len(ran_in) == 3 and threading.current_thread() not in ran_in
    assert ran_in[0] is ran_in[1] is ran_in[2], "every attempt started a thread of its own"


def test_a_forked_child_starts_its_own_runners(openai_server: FakeOpenAIServer) -> None:
    """A forked child (extraction worker processes) has none of its parent's threads: an attempt handed to a runner
    that was idle in the parent would never run, and the request would wait out its timeout."""
    import os

    openai_server.script_chat(["parent", "child"])
    client = make_client(openai_server, timeout=5.0, max_retries=0)
    client.complete(MESSAGES, stage="answer")   # the parent now has an idle runner
    pid = os.fork()
    if pid == 0:   # the child: exit 0 only if its own request was answered
        try:
            child = make_client(openai_server, timeout=5.0, max_retries=0)
            os._exit(0 if child.complete(MESSAGES, stage="answer").text == "child" else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _reply(content, finish="stop", usage=True) -> dict:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-chat",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]}
    if usage:
        body["usage"] = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    return body


def test_complete_reads_the_reply_body_itself(openai_server: FakeOpenAIServer, caplog) -> None:
    """``complete`` reads text, finish reason and usage from the reply's JSON (not through the SDK's model): a cut
    answer is kept and said so, a reply without usage counts zero tokens, no text is an output error naming the
    output cap when it ran out."""
    openai_server.script_chat([_reply("cut short", "length"), _reply("no usage", usage=False), _reply(None, "length"),
                               _reply("")])
    client = make_client(openai_server)
    with caplog.at_level(logging.WARNING):
        cut = client.complete(MESSAGES, stage="answer")
    assert (cut.text, cut.truncated, cut.usage.prompt_tokens, cut.usage.completion_tokens) == ("cut short", True, 7, 3)
    assert "stopped at max_tokens" in caplog.text
    plain = client.complete(MESSAGES, stage="answer")
    assert (plain.text, plain.truncated, plain.usage.prompt_tokens, plain.usage.calls) == ("no usage", False, 0, 1)
    with pytest.raises(LLMOutputError, match="output cap"):
        client.complete(MESSAGES, stage="answer")
    with pytest.raises(LLMOutputError, match="returned no text") as empty:
        client.complete(MESSAGES, stage="answer")
    assert "output cap" not in str(empty.value)


def test_a_compressed_reply_is_read_as_the_server_meant_it() -> None:
    """A reply sent with ``Content-Encoding: gzip`` (a proxy, a gateway) reaches the SDK decoded: the transport hands
    the client the body it read as the server's stream, not as content it would take for plain bytes."""
    import gzip
    import http.server

    reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": json.dumps(EXTRACTION)}}],
             "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}

    class Gzipped(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:   # noqa: N802 - the http.server hook's name
            self.rfile.read(int(self.headers["Content-Length"]))
            body = gzip.compress(json.dumps(reply).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gzipped)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = LLMClient(f"http://127.0.0.1:{server.server_address[1]}/v1", "m", api_key=SECRET, timeout=30.0)
        assert client.structured(MESSAGES, ChunkExtraction).value == ChunkExtraction.model_validate(EXTRACTION)
        answer = client.complete(MESSAGES)
        assert answer.text == json.dumps(EXTRACTION) and answer.usage.prompt_tokens == 3
    finally:
        server.shutdown()
        server.server_close()
