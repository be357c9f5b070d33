"""The fake OpenAI-compatible server itself, driven by the real openai client (what other tests rely on)."""

from __future__ import annotations

import json
import math

import httpx2
import openai
import pytest

from pathrag_lab.testing.openai_server import FakeOpenAIServer, hash_embedding


@pytest.fixture
def client(openai_server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=openai_server.base_url, api_key="sk-x", timeout=1.0, max_retries=1)


def test_embeddings_are_deterministic_unit_vectors_in_both_encodings(
    openai_server: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    as_base64 = client.embeddings.create(model="fake-embed", input=["alpha", "beta"])  # openai's default
    as_float = client.embeddings.create(model="fake-embed", input=["alpha", "beta"], encoding_format="float")

    for response in (as_base64, as_float):
        assert [d.index for d in response.data] == [0, 1]
        assert response.data[0].embedding == pytest.approx(hash_embedding("alpha"), abs=1e-6)
        assert len(response.data[1].embedding) == 8
        assert math.isclose(sum(x * x for x in response.data[1].embedding), 1.0, rel_tol=1e-5)
    assert as_float.data[0].embedding != as_float.data[1].embedding
    assert [b["input"] for _, b in openai_server.calls] == [["alpha", "beta"], ["alpha", "beta"]]


def test_embed_script_and_responder(openai_server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    openai_server.script_embed([[[1.0, 0.0]]])
    openai_server.embed_responder = lambda texts, model: [[float(len(t)), 0.5, 0.25] for t in texts]

    scripted = client.embeddings.create(model="m", input="first", encoding_format="float")
    answered = client.embeddings.create(model="m", input=["four", "seven"], encoding_format="float")

    assert scripted.data[0].embedding == [1.0, 0.0]
    assert [d.embedding for d in answered.data] == [[4.0, 0.5, 0.25], [5.0, 0.5, 0.25]]


def test_faults_on_the_embeddings_endpoint(openai_server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    openai_server.inject("500", endpoint="embeddings")
    assert len(client.embeddings.create(model="m", input=["x"]).data) == 1
    assert openai_server.count("embeddings") == 2

    openai_server.inject("malformed", endpoint="embeddings")
    with pytest.raises(ValueError):  # the body is not JSON
        client.embeddings.create(model="m", input=["x"])


def test_chat_full_response_override_and_models(openai_server: FakeOpenAIServer, client: openai.OpenAI) -> None:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "other",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}]}
    openai_server.script_chat([body])

    response = client.chat.completions.create(model="fake-chat", messages=[{"role": "user", "content": "q"}])

    assert (response.model, response.choices[0].finish_reason, response.usage) == ("other", "length", None)
    assert [m.id for m in client.models.list()] == ["fake-chat", "fake-embed"]
    assert openai_server.count() == 2 and openai_server.count("models") == 1


def test_unknown_route_and_bad_scripting(openai_server: FakeOpenAIServer) -> None:
    assert httpx2.post(openai_server.base_url + "/completions", json={}).status_code == 404
    with pytest.raises(ValueError, match="'teapot'"):
        openai_server.inject("teapot")
    with pytest.raises(ValueError, match="'audio'"):
        openai_server.inject("500", endpoint="audio")


def test_lifecycle_stop_with_a_stalled_request_then_restart() -> None:
    server = FakeOpenAIServer().start()
    server.timeout_sleep = 30.0
    server.inject("timeout")
    stalled = openai.OpenAI(base_url=server.base_url, api_key="k", timeout=0.3, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        stalled.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    server.stop()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url

    with server:  # a stopped server starts again, on a fresh port, with its records kept until reset()
        again = openai.OpenAI(base_url=server.base_url, api_key="k", timeout=1.0, max_retries=0)
        answer = again.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        assert answer.choices[0].message.content == "echo: q"
        assert server.count("chat") == 2


# ---- behaviours of real local servers (llama.cpp, Ollama) -------------------------------------------

def _chat(server: FakeOpenAIServer, **body) -> httpx2.Response:
    payload = {"model": "fake-chat", "messages": [{"role": "user", "content": "hi"}], **body}
    return httpx2.post(f"{server.base_url}/chat/completions", json=payload, timeout=10)


def test_serial_server_processes_one_request_at_a_time(openai_server: FakeOpenAIServer) -> None:
    import threading

    openai_server.serial = True
    openai_server.response_delay = 0.1
    threads = [threading.Thread(target=_chat, args=(openai_server,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert openai_server.count("chat") == 4
    assert openai_server.max_processing == 1  # queued in the server, answered one after another


def test_output_is_cut_only_at_the_requests_max_tokens(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat(["one two three four five", "one two three four five"])
    uncapped = _chat(openai_server).json()
    capped = _chat(openai_server, max_tokens=2).json()
    assert uncapped["choices"][0]["message"]["content"] == "one two three four five"
    assert uncapped["choices"][0]["finish_reason"] == "stop"
    assert capped["choices"][0]["message"]["content"] == "one two"
    assert capped["choices"][0]["finish_reason"] == "length"
    assert capped["usage"]["completion_tokens"] == 2


def test_cut_tool_call_is_reported_as_tool_calls(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat(['{"entities": [{"name": "Ada"}], "relations": []}'])
    tools = [{"type": "function", "function": {"name": "ChunkExtraction", "parameters": {}}}]
    body = _chat(openai_server, tools=tools, max_tokens=2).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"  # as llama.cpp says, although max_tokens cut it
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"entities": [{"name":'


def test_unsupported_response_format_gets_llama_cpps_500(openai_server: FakeOpenAIServer) -> None:
    openai_server.unsupported_formats = {"json_schema"}
    rejected = _chat(openai_server, response_format={"type": "json_schema", "json_schema": {"name": "x"}})
    accepted = _chat(openai_server, response_format={"type": "json_object"})
    assert rejected.status_code == 500 and "Input should be 'text' or 'json_object'" in rejected.text
    assert accepted.status_code == 200


def test_runaway_model_stalls_without_a_cap_and_is_cut_with_one(openai_server: FakeOpenAIServer) -> None:
    openai_server.runaway = True
    openai_server.timeout_sleep = 0.2
    body = _chat(openai_server, max_tokens=5).json()
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 5
    assert _chat(openai_server).json()["choices"][0]["finish_reason"] == "length"  # after the stall


def test_schema_echo_repeats_the_schema_in_the_prompt() -> None:
    from pathrag_lab.testing.openai_server import schema_echo

    prompt = 'Answer as:\n{\n  "$defs": {"E": {"type": "object"}},\n  "properties": {"entities": {}},\n  "title": "ChunkExtraction",\n  "type": "object"\n}\nnow'
    echo = schema_echo({"messages": [{"role": "system", "content": prompt}]})
    assert json.loads(echo) == {"properties": {"entities": {}}, "title": "ChunkExtraction", "type": "object"}


@pytest.mark.parametrize(("fault", "check"), [
    ("empty_choices", lambda r: r.json()["choices"] == []),
    ("echo_key", lambda r: r.status_code == 500 and "Bearer sk-echo" in r.text),
])
def test_chat_faults_of_real_servers(openai_server: FakeOpenAIServer, fault: str, check) -> None:
    openai_server.inject(fault)
    reply = httpx2.post(f"{openai_server.base_url}/chat/completions", timeout=10,
                        headers={"Authorization": "Bearer sk-echo"},
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert check(reply)


@pytest.mark.parametrize(("fault", "vectors"), [("empty_data", 0), ("short", 1)])
def test_embedding_faults_of_real_servers(openai_server: FakeOpenAIServer, fault: str, vectors: int) -> None:
    openai_server.inject(fault, endpoint="embeddings")
    reply = httpx2.post(f"{openai_server.base_url}/embeddings", json={"model": "m", "input": ["a", "b"]}, timeout=10)
    assert len(reply.json()["data"]) == vectors
