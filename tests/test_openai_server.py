"""The fake OpenAI-compatible server itself, driven by the real openai client (what other tests rely on)."""

from __future__ import annotations

import math

import httpx2
import openai
import pytest

from tests.openai_server import FakeOpenAIServer, hash_embedding


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
