"""Embedding endpoint faults (issue 10 item 5) and the key echoed by an embeddings endpoint (item 7)."""

from __future__ import annotations

import logging

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.llm.embedding import EmbeddingError, OpenAIEmbedder, embedder_from_settings
from pathrag_pipeline.storage.vector_store import VectorStore
from pathrag_lab.testing.openai_server import FakeOpenAIServer, hash_embedding

SECRET = "sk-embed-5ecret-never-shown-91bc"


@pytest.mark.parametrize("fault", ["empty_data", "short", "timeout", "trickle", "cut_body"])
def test_bad_reply_is_retried_like_the_chat_path(openai_server: FakeOpenAIServer, fault: str) -> None:
    openai_server.timeout_sleep = 1.5
    openai_server.trickle_interval = 0.05
    openai_server.inject(fault, times=1, endpoint="embeddings")
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=2, timeout=0.6)

    vectors = embedder.embed(["alpha", "beta", "gamma"])

    assert vectors.shape == (3, 8)
    assert openai_server.count("embeddings") == 2


def test_persistent_empty_reply_fails_with_a_clear_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("empty_data", times=10, endpoint="embeddings")
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=1, timeout=1)
    with pytest.raises(EmbeddingError, match="returned 0 embeddings for 2 texts"):
        embedder.embed(["a", "b"])
    assert openai_server.count("embeddings") == 2


def test_persistently_cut_replies_fail_in_one_line_naming_the_embeddings_endpoint(
        openai_server: FakeOpenAIServer) -> None:
    """A 200 whose JSON is cut off was not retried: one reply crashed `pathrag index` with a 142-line traceback
    and `ask` said "Unterminated string" without naming the endpoint (issue 22 item 2)."""
    openai_server.inject("cut_body", times=10, endpoint="embeddings")
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=2, timeout=2)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["a", "b"])
    message = str(caught.value)
    assert "\n" not in message and openai_server.base_url in message and "PATHRAG_EMBED_BASE_URL" in message
    assert "not a JSON object" in message and "PATHRAG_LLM" not in message
    assert openai_server.count("embeddings") == 3                    # retried, then stopped


def test_embeddings_timeout_comes_from_the_settings(openai_server: FakeOpenAIServer) -> None:
    env = {"PATHRAG_EMBED_BASE_URL": openai_server.base_url, "PATHRAG_EMBED_MODEL": "fake-embed"}
    assert embedder_from_settings(Settings.from_env({**env, "PATHRAG_EMBED_TIMEOUT": "7"})).timeout == 7
    # without its own setting it follows the LLM timeout
    assert embedder_from_settings(Settings.from_env({**env, "PATHRAG_LLM_TIMEOUT": "33"})).timeout == 33


def test_a_failing_batch_fails_alone_and_is_embedded_next_time(openai_server: FakeOpenAIServer, tmp_path) -> None:
    """Batches of 2: the second one gets ``data: []`` on its only attempt; the first and third are written,
    the table exists, the failure is reported, and the next sync embeds what is missing."""
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0, batch_size=2)
    store = VectorStore(tmp_path / "lance")
    rows = [(f"k{i}", f"text {i}") for i in range(6)]
    calls = []

    def responder(texts, model):
        calls.append(texts)
        if len(calls) == 2:  # the second batch gets data: []
            return {"object": "list", "data": [], "model": model}
        return [hash_embedding(t) for t in texts]

    openai_server.embed_responder = responder
    first = store.sync("chunks", rows, embedder)

    assert (first.embedded, first.failed) == (4, 2)
    assert first.errors and "0 embeddings for 2 texts" in first.errors[0]
    assert store.keys("chunks") == {"k0", "k1", "k4", "k5"}

    second = store.sync("chunks", rows, embedder)
    assert (second.embedded, second.failed) == (2, 0)
    assert store.keys("chunks") == {f"k{i}" for i in range(6)}


def test_key_echoed_by_the_embeddings_endpoint_is_masked(openai_server: FakeOpenAIServer,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    openai_server.inject("echo_key", times=5, endpoint="embeddings")
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", api_key=SECRET, max_retries=1)
    with pytest.raises(EmbeddingError) as info:
        embedder.embed(["a"])
    assert "upstream rejected credentials" in caplog.text + str(info.value)
    assert SECRET not in str(info.value) and SECRET not in caplog.text
    assert info.value.__cause__ is None or SECRET not in repr(info.value.__cause__)


def test_a_table_whose_every_batch_fails_is_still_created(openai_server: FakeOpenAIServer, tmp_path) -> None:
    """The dimension is known (another table was embedded): the table exists, empty, and the next sync fills it."""
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=0, batch_size=2)
    store = VectorStore(tmp_path / "lance")
    store.sync("chunks", [("c0", "chunk text")], embedder)
    openai_server.inject("empty_data", times=3, endpoint="embeddings")
    rows = [(f"e{i}", f"entity {i}") for i in range(5)]

    stats = store.sync("entities", rows, embedder)

    assert (stats.embedded, stats.failed, stats.total) == (0, 5, 0)
    assert "entities" in store.tables() and store.count("entities") == 0
    assert store.sync("entities", rows, embedder).embedded == 5


def test_a_refused_embeddings_key_is_one_request_naming_the_embed_setting(openai_server: FakeOpenAIServer) -> None:
    openai_server.inject("401", times=10, endpoint="embeddings")
    embedder = OpenAIEmbedder(openai_server.base_url, "fake-embed", max_retries=3)
    with pytest.raises(EmbeddingError, match="PATHRAG_EMBED_API_KEY"):
        embedder.embed(["one", "two"])
    assert openai_server.count("embeddings") == 1
