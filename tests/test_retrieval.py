"""Node retrieval, the LightRAG mode contexts, and the per-version graph cache."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.llm.embedding import HashingEmbedder
from pathrag_pipeline.query.graph_cache import EmptyGraphError, load_graph
from pathrag_pipeline.query.retrieval import (
    BACKGROUND_MIN,
    RetrievedNode,
    global_context,
    hybrid_context,
    local_context,
    naive_context,
    query_keywords,
    retrieve_nodes,
    retrieve_relations,
    round_robin,
    seeds_stand_out,
    standing_seeds,
)
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.storage.vector_store import VectorStore
from tests.query_fixtures import build_tiny_index, chunk_id, relation_key


@pytest.fixture
def tiny(tmp_path):
    graph_cache.clear_cache()
    settings = build_tiny_index(tmp_path / "home")
    store = Store(settings.duckdb_path)
    return settings, store, load_graph(store), VectorStore(settings.lancedb_path), HashingEmbedder()


def test_round_robin_takes_each_keywords_best_before_any_second_hit():
    rankings = [[("a", 0.9), ("b", 0.8), ("c", 0.7)], [("a", 0.95), ("d", 0.5)], [("e", 0.4)]]
    merged = round_robin(rankings, limit=10)
    assert [(w, k) for w, k, _ in merged] == [(0, "a"), (2, "e"), (0, "b"), (1, "d"), (0, "c")]
    assert [k for _, k, _ in round_robin(rankings, limit=3)] == ["a", "e", "b"]


def test_query_keywords_dedupes_and_falls_back_to_question():
    assert query_keywords(["Helena Voss", "helena  voss"], ["founders"], "q") == ["Helena Voss", "founders"]
    assert query_keywords([], [], "  Who founded it? ") == ["Who founded it?"]


def test_retrieve_nodes_finds_named_entities_per_keyword(tiny):
    _, _, snapshot, vectors, embedder = tiny
    nodes = retrieve_nodes(snapshot, vectors, embedder, ["Lindenholm", "Aldermere University"], top_n=4)
    assert len(nodes) == 4
    assert len({n.entity_key for n in nodes}) == 4
    assert [n.entity_key for n in nodes[:2]] == ["lindenholm", "aldermere university"]
    assert [n.keyword for n in nodes[:2]] == ["Lindenholm", "Aldermere University"]
    assert [n.rank for n in nodes] == [0, 1, 2, 3]
    assert nodes[0].similarity >= nodes[2].similarity
    assert all(snapshot.entity_keys[n.node] == n.entity_key for n in nodes)


def test_retrieve_nodes_caps_at_graph_size_and_rejects_bad_top_n(tiny):
    _, _, snapshot, vectors, embedder = tiny
    assert len(retrieve_nodes(snapshot, vectors, embedder, ["river"], top_n=40)) == snapshot.node_count
    with pytest.raises(ValueError, match="top_n=0"):
        retrieve_nodes(snapshot, vectors, embedder, ["river"], top_n=0)


def test_vector_hits_missing_from_graph_are_skipped(tiny):
    _, _, snapshot, vectors, embedder = tiny
    vectors.upsert("entities", [("ghost town", "Lindenholm ghost entry")], embedder)
    nodes = retrieve_nodes(snapshot, vectors, embedder, ["Lindenholm"], top_n=40)
    assert "ghost town" not in {n.entity_key for n in nodes}


def test_local_context_collects_ego_network_and_source_chunks(tiny):
    _, _, snapshot, vectors, embedder = tiny
    nodes = retrieve_nodes(snapshot, vectors, embedder, ["Helena Voss"], top_n=1)
    ctx = local_context(snapshot, nodes)
    keys = {snapshot.relation_keys[r] for r in ctx.relations}
    assert keys == {relation_key("aldermere university", "helena voss"), relation_key("helena voss", "lindenholm"),
                    relation_key("helena voss", "tomas arden")}
    assert ctx.chunk_ids == [chunk_id("voss.md")]


def test_global_context_takes_relation_endpoints(tiny):
    _, _, snapshot, vectors, embedder = tiny
    rels = retrieve_relations(snapshot, vectors, embedder, ["flows into sea"], top_n=1)
    assert rels[0].relation_key == relation_key("grey sea", "varne river")
    ctx = global_context(snapshot, rels)
    assert {n.entity_key for n in ctx.nodes} == {"grey sea", "varne river"}
    assert ctx.chunk_ids == [chunk_id("brackwater.md")]
    merged = hybrid_context(local_context(snapshot, retrieve_nodes(snapshot, vectors, embedder, ["Oldport"], 1)), ctx)
    assert {n.entity_key for n in merged.nodes} == {"oldport", "grey sea", "varne river"}
    assert [n.rank for n in merged.nodes] == [0, 1, 2]
    assert merged.chunk_ids[:2] == [chunk_id("kettle.md"), chunk_id("brackwater.md")]


def test_naive_context_ranks_chunks_by_question(tiny):
    _, _, _, vectors, embedder = tiny
    ctx = naive_context(vectors, embedder, "Which bakery sells rye bread?", top_n=2)
    assert ctx.chunk_ids[0] == chunk_id("kettle.md")
    assert len(ctx.chunk_ids) == 2


def test_graph_snapshot_is_reused_until_the_graph_changes(tiny):
    _, store, snapshot, _, _ = tiny
    assert load_graph(store) is snapshot
    assert snapshot.view.edge_count == 8
    with store.connect() as con:
        con.execute("UPDATE entities SET description = 'changed', updated_at = ? WHERE entity_key = 'oldport'",
                    [datetime(2026, 2, 1)])
    fresh = load_graph(store)
    assert fresh is not snapshot and fresh.version != snapshot.version
    assert fresh.entity_descriptions[fresh.node_of("oldport")] == "changed"
    with store.connect() as con:
        con.execute("DELETE FROM relations WHERE relation_key = ?", [relation_key("copper kettle", "rye bread")])
    assert load_graph(store).view.edge_count == 7


def test_empty_graph_is_a_clear_error(tmp_path):
    graph_cache.clear_cache()
    store = Store(tmp_path / "empty.duckdb")
    with store.connect():
        pass
    with pytest.raises(EmptyGraphError, match="pathrag index"):
        load_graph(store)


class _FakeVectors:
    """Scripted hits per call, to check the merge independently of the embedder."""

    def __init__(self, per_call):
        self.per_call = list(per_call)

    def nearest(self, table, vectors, k, embedder=None):
        return [[(key, sim) for key, sim in self.per_call.pop(0)][:k] for _ in vectors]


def test_retrieve_nodes_round_robins_over_keywords(tiny):
    _, _, snapshot, _, embedder = tiny
    fake = _FakeVectors([
        [("brackwater", 0.9), ("grey sea", 0.8), ("oldport", 0.7)],
        [("brackwater", 0.99), ("lindenholm", 0.6)],
    ])
    nodes = retrieve_nodes(snapshot, fake, embedder, ["k1", "k2"], top_n=3)
    assert [(n.keyword, n.entity_key) for n in nodes] == [("k1", "brackwater"), ("k1", "grey sea"), ("k2", "lindenholm")]


def test_retrieve_nodes_gives_lexical_only_hits_their_own_cosine(tiny):
    _, _, snapshot, vectors, embedder = tiny

    class OnlyLexical:
        """BM25 over entities that finds the entity the vector search is told it missed."""

        def search(self, text, k):
            return [("lindenholm", 3.0)]

    class Blind:
        def nearest(self, table, vectors, k, embedder=None):
            return [[] for _ in vectors]

        def similarities(self, table, vector, keys):
            return vectors.similarities(table, vector, keys)

    nodes = retrieve_nodes(snapshot, Blind(), embedder, ["Lindenholm river town"], top_n=1, lexical=OnlyLexical())
    assert [n.entity_key for n in nodes] == ["lindenholm"]
    expected = vectors.similarities("entities", embedder.embed(["Lindenholm river town"])[0], ["lindenholm"])
    assert nodes[0].similarity == pytest.approx(expected["lindenholm"]) and 0 < nodes[0].similarity < 1


def test_vector_store_similarities_are_the_search_cosines(tiny):
    _, _, _, vectors, embedder = tiny
    query = embedder.embed(["Aldermere University"])[0]
    hits = vectors.search("entities", query, 3)
    sims = vectors.similarities("entities", query, [h.key for h in hits] + ["no such key"])
    assert set(sims) == {h.key for h in hits}
    assert all(sims[h.key] == pytest.approx(h.similarity, abs=1e-6) for h in hits)


def test_first_similarities_of_a_table_version_read_those_rows_alone_then_the_table(tiny):
    """A new process weighs a few rows without loading every vector; the next call loads the in-memory copy; both
    give the same cosines, bit for bit, and a new table version is read by rows again."""
    settings, _, _, _, embedder = tiny
    query = embedder.embed(["Helena Voss chemist"])[0]
    keys = ["helena voss", "no such key", "brackwater", "helena voss"]
    fresh = VectorStore(settings.lancedb_path)
    first = fresh.similarities("entities", query, keys)
    assert "entities" not in fresh._snapshots and list(first) == ["helena voss", "brackwater"]
    second = fresh.similarities("entities", query, keys)
    assert "entities" in fresh._snapshots and second == first
    assert fresh.similarities("entities", query, ["o'brien"]) == {} and fresh.similarities("entities", query, []) == {}
    fresh.upsert("entities", [("o'brien", "O'Brien\nA name with a quote.")], embedder)
    third = fresh.similarities("entities", query, ["o'brien", "brackwater"])   # the table moved on: rows again
    assert set(third) == {"o'brien", "brackwater"} and third["brackwater"] == first["brackwater"]
    assert fresh._snapshots.get("entities") is None or fresh._snapshots["entities"].version != fresh._rows_read["entities"]
    assert VectorStore(settings.lancedb_path).matrix("entities")[0].count("o'brien") == 1


def test_rank_passages_prefers_top_seeds_and_spreads_hubs():
    from pathrag_pipeline.query.retrieval import rank_passages

    hub_chunks = [f"h{i}" for i in range(15)]
    seeds = [(0, ["a", "b"]), (1, hub_chunks), (2, ["c"])]
    ranked = rank_passages(seeds, [], limit=50)
    # the best seed's passages first; a lower seed with one passage beats a hub's many
    assert ranked[:2] == ["a", "b"]
    assert ranked.index("c") < ranked.index("h0")
    assert len(ranked) == 18


def test_rank_passages_adds_path_evidence_to_the_first_provenance_chunks():
    from pathrag_pipeline.query.retrieval import rank_passages

    seeds = [(0, ["a"]), (1, ["b"]), (2, ["c"])]
    # a reliable path whose edge comes from passage c lifts it above b; its fourth chunk gets nothing
    ranked = rank_passages(seeds, [(1, 2.0, ["c", "x", "y", "z"])], limit=10)
    assert ranked.index("c") < ranked.index("b")
    assert "z" not in ranked and "x" in ranked
    assert rank_passages(seeds, [(1, 2.0, ["c"])], limit=2) == ranked[:2]


class _Background:
    """A vector store of ``n`` random unit vectors (the entities) for ``seeds_stand_out``."""

    def __init__(self, n: int, dim: int = 64, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        m = rng.normal(size=(n, dim)).astype(np.float32)
        self.m = m / np.linalg.norm(m, axis=1, keepdims=True)

    def matrix(self, table):
        return [f"e{i}" for i in range(len(self.m))], self.m


def _node(keyword: str, similarity: float) -> RetrievedNode:
    return RetrievedNode(0, keyword, 0, "k", "K", similarity)


def test_a_seed_must_stand_out_of_its_keywords_background_to_count():
    """Issue 25: an off-topic question got paths between whatever entities came nearest."""
    store = _Background(2000)
    query = store.m[0]                                   # the keyword's vector: entity 0 itself
    sims = store.m @ query
    background_best = float(np.sort(sims)[-2])           # the nearest *other* entity: chance
    assert seeds_stand_out(store, query[None, :], ["kw"], [_node("kw", float(sims[0]))])    # the entity named
    assert not seeds_stand_out(store, query[None, :], ["kw"], [_node("kw", background_best)])
    assert seeds_stand_out(store, query[None, :], ["kw"], [_node("kw", 1.0)])               # an exact name
    assert not seeds_stand_out(store, query[None, :], ["kw"], [])
    # too few entities to estimate a background: every seed passes
    assert seeds_stand_out(_Background(BACKGROUND_MIN - 1), query[None, :], ["kw"], [_node("kw", 0.01)])


def test_standing_seeds_keeps_each_seed_that_clears_its_own_keywords_bar_in_order():
    """path_seeds="standing": the paths run only between these (query/params.py PATH_SEEDS)."""
    store = _Background(2000)
    queries = np.stack([store.m[0], store.m[1]])         # two keywords, each naming one entity
    sims = store.m @ queries.T
    chance = [float(np.sort(sims[:, j])[-2]) for j in range(2)]
    seeds = [RetrievedNode(0, "a", 0, "a0", "A0", float(sims[0, 0])),     # stands out for "a"
             RetrievedNode(1, "b", 5, "b5", "B5", chance[1]),            # chance for "b"
             RetrievedNode(2, "b", 1, "b1", "B1", float(sims[1, 1])),    # stands out for "b"
             RetrievedNode(3, "a", 7, "a7", "A7", chance[0]),            # chance for "a"
             RetrievedNode(4, "c", 9, "c9", "C9", 1.0)]                  # an exact name (keyword not embedded)
    assert [n.entity_key for n in standing_seeds(store, queries, ["a", "b"], seeds)] == ["a0", "b1", "c9"]
    assert standing_seeds(store, queries, ["a", "b"], []) == []
    assert standing_seeds(_Background(BACKGROUND_MIN - 1), queries, ["a", "b"], seeds) == seeds


def test_seed_options_keep_the_logged_params_of_queries_that_do_not_use_them():
    """A stored answer's key is its mode's params: options added later must not change the keys of default runs."""
    from pathrag_pipeline.query.params import QueryParams, mode_params

    default = mode_params("path", QueryParams())
    assert "path_seeds" not in default and "seed_query" not in default
    assert mode_params("path", QueryParams(path_seeds="standing")) == {**default, "path_seeds": "standing"}
    assert mode_params("path", QueryParams(seed_query="joined")) == {**default, "seed_query": "joined"}
    assert "path_seeds" not in mode_params("naive", QueryParams(path_seeds="standing"))
    default["graph_version"] = "v1"   # a caller adds to its dict (the engine does): the next caller's is its own
    assert "graph_version" not in mode_params("path", QueryParams())
    with pytest.raises(ValueError, match="path_seeds='some' is not one of all, standing"):
        QueryParams(path_seeds="some").resolved()
