"""The query engine embeds a text once however many of its stages ask for it (query/recent_vectors.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.query.engine import PathRAG
from pathrag_pipeline.query.recent_vectors import MAX_KEPT_CALL, RecentVectors
from tests.query_fixtures import tiny_index_home


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.asked: Counter[str] = Counter()

    def embed(self, texts):
        self.asked.update(texts)
        return super().embed(texts)


def test_vectors_equal_the_inner_embedders_and_a_kept_text_is_not_asked_again():
    inner = Counting()
    recent = RecentVectors(inner, max_texts=3)
    first = recent.embed(["a river", "a mill", "a river"])
    assert np.array_equal(first, HashingEmbedder().embed(["a river", "a mill", "a river"]))
    assert inner.asked == Counter({"a river": 1, "a mill": 1})      # a repeat within a call is asked once too
    recent.embed(["a mill", "a bridge"])
    assert inner.asked["a mill"] == 1 and inner.asked["a bridge"] == 1
    recent.embed(["a ford", "a moor"])          # four texts kept at most three: the oldest used, "a river", goes
    recent.embed(["a river"])
    assert inner.asked["a river"] == 2
    assert recent.embed([]).shape == (0, recent.dim) and recent.identity == inner.identity


def test_a_bulk_call_passes_through_unkept():
    inner = Counting()
    recent = RecentVectors(inner)
    names = [f"name {i}" for i in range(MAX_KEPT_CALL + 1)]
    recent.embed(names)
    recent.embed(names[:1])
    assert inner.asked[names[0]] == 2


def test_a_path_query_with_pooling_embeds_the_question_once(tmp_path, monkeypatch):
    settings = tiny_index_home(tmp_path, monkeypatch)
    inner = Counting()
    rag = PathRAG(settings, embedder=inner, record=False)
    question = "Which sea does the Varne River flow into?"
    result = rag.query(question, mode="path", path_pooling="rerank")
    assert result.paths                                  # the stages that embed the question ran
    assert inner.asked[question] == 1, inner.asked


def test_an_offline_path_query_asks_its_embedder_once_for_the_keywords_and_the_question(tmp_path, monkeypatch):
    """Offline keywords: the seed queries and the question go in one embedding call (one request to an endpoint),
    not one for the keywords and another when the sources stage embeds the question."""
    settings = tiny_index_home(tmp_path, monkeypatch)
    inner = Counting()
    calls: list[list[str]] = []
    real = inner.embed
    inner.embed = lambda texts: calls.append(list(texts)) or real(texts)
    rag = PathRAG(settings, embedder=inner, record=False)
    question = "Which sea does the Varne River flow into?"
    assert rag.query(question, mode="path", keywords="offline").paths
    assert len(calls) == 1 and question in calls[0] and len(calls[0]) > 1, calls
