"""BM25, reciprocal rank fusion, personalised PageRank passage ranking, seed pass-through, eval helpers."""

from __future__ import annotations

import numpy as np
import pytest

from pathrag_pipeline.evaluation.retrieval_eval import (
    ABLATIONS, QuestionOutcome, by_hops, default_modes, resolve_mode)
from pathrag_pipeline.query.graph_view import GraphView
from pathrag_pipeline.query.lexical import STOPWORDS, BM25Index, tokenize
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.query.pruning import prune_paths
from pathrag_pipeline.query.ranking import PassageGraph, restart_weights, rrf


def test_tokenize_drops_stopwords_single_letters_and_accents():
    assert tokenize("The Café of a Zoë in 1960") == ["cafe", "zoe", "1960"]


def test_bm25_ranks_rare_term_matches_first_and_skips_non_matches():
    index = BM25Index.build(["a", "b", "c", "d"], [
        "river river river town", "town hall town", "the mill on the river town", "nothing relevant here"])
    hits = index.search("mill town", 10)
    assert hits[0][0] == "c"                       # only passage with the rare term
    assert "d" not in [k for k, _ in hits]         # no term in common: not returned
    assert all(s > 0 for _, s in hits)
    with pytest.raises(ValueError):
        index.search("town", 0)


def test_bm25_length_normalisation_prefers_the_shorter_passage():
    index = BM25Index.build(["short", "long"], ["castle", "castle " + "filler words " * 30])
    assert [k for k, _ in index.search("castle", 2)] == ["short", "long"]


def _textbook_tokenize(text: str) -> list[str]:
    import re
    import unicodedata
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [w for w in re.findall(r"\w\w+", folded) if w not in STOPWORDS]


def _textbook_scores(texts: list[str], query: str, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    docs = [_textbook_tokenize(t) for t in texts]
    avgdl = (sum(map(len, docs)) / len(docs)) or 1.0
    out = np.zeros(len(docs))
    for term in dict.fromkeys(_textbook_tokenize(query)):
        df = sum(term in d for d in docs)
        idf = np.log(1.0 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = d.count(term)
            if tf:
                out[i] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len(d) / avgdl))
    return out


def test_tokenize_folds_accents_like_nfkd_without_combining_marks():
    samples = ["Zoë naïve café", "e\u0301te\u0301 decomposed", "Ελληνικά Ἀθῆναι", "東京 タワー", "ﬁnance ½ ＡＢＣ",
               "plain ascii only", "Ångström and Škoda", "", "a b c"]
    for text in samples:
        assert tokenize(text) == _textbook_tokenize(text), text


def test_bm25_scores_are_the_textbook_formula_on_random_passages():
    rng = np.random.default_rng(7)
    words = ["river", "town", "mill", "Café", "café", "bridge", "zoë", "north", "the", "a", "of", "x1", "42"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 30))) for _ in range(60)] + ["", "the a of"]
    index = BM25Index.build([f"p{i}" for i in range(len(texts))], texts)
    for query in ["river town", "cafe", "mill mill north", "zoe 42", "the", "nothing", "x1 bridge river"]:
        np.testing.assert_allclose(index.scores(query), _textbook_scores(texts, query), rtol=1e-12, atol=0)
    empty = BM25Index.build([], [])
    assert empty.search("river", 3) == [] and empty.scores("river").shape == (0,)


def test_rrf_rewards_agreement_and_keeps_first_appearance_on_ties():
    assert rrf([["x", "y", "z"], ["y", "x", "w"]])[:2] in (["x", "y"], ["y", "x"])
    assert rrf([["a", "b"], ["c", "b"]])[0] == "b"          # second in both beats first in one
    assert rrf([["a"], ["c"]]) == ["a", "c"]
    assert rrf([["a", "b", "c"]], limit=2) == ["a", "b"]


def _toy_graph() -> PassageGraph:
    # entities 0-1-2 in a chain, 3 isolated; passages: p0 (entity 0), p12 (entities 1 and 2), p3 (entity 3)
    return PassageGraph(4, [0, 1], [1, 2], [("p0",), ("p12",), ("p12",), ("p3",)])


def test_pagerank_from_a_seed_reaches_its_neighbourhood_not_unconnected_passages():
    graph = _toy_graph()
    restart = np.zeros(graph.n)
    restart[0] = 1.0
    r = graph.pagerank(restart)
    score = {c: r[graph.entity_count + i] for i, c in enumerate(graph.chunk_keys)}
    assert score["p0"] > score["p12"] > 0
    assert score["p3"] == 0
    assert r.sum() == pytest.approx(1.0)


def test_restart_weights_sum_to_one_and_a_path_weighs_both_its_end_seeds():
    graph = _toy_graph()
    # seed 0 at rank 0 with similarity 0.8 (weight 0.8), seed 2 at rank 1 with 0.6 (weight 0.6 / 2 = 0.3)
    w = restart_weights(graph, [(0, 0, 0.8), (1, 2, 0.6)], [(0, 2, 1.0, (0, 1, 2), ["p12"])], text=[("p3", 0.8)])
    assert w.sum() == pytest.approx(1.0)
    p12 = graph.entity_count + graph.chunk_index["p12"]
    assert w[2] / w[0] == pytest.approx(0.3 / 0.8)
    # the best path weighs the product of its end seeds' weights (0.8 x 0.3), less than its weaker end
    assert w[p12] / w[0] == pytest.approx(0.8 * 0.3 / 0.8) and w[p12] < w[2]
    assert w[graph.entity_count + graph.chunk_index["p3"]] == pytest.approx(w[0])   # same similarity and rank


def test_restart_weights_scale_each_item_by_its_similarity_and_unweighted_by_rank_alone():
    graph = _toy_graph()
    seeds = [(0, 0, 0.2), (1, 3, 0.9)]
    text = [("p12", 0.1), ("p0", 0.6)]
    w = restart_weights(graph, seeds, text=text)
    p12, p0 = (graph.entity_count + graph.chunk_index[c] for c in ("p12", "p0"))
    # a close match at rank 1 outweighs a loose one at rank 0; the same for text hits
    assert w[3] / w[0] == pytest.approx((0.9 / 2) / 0.2)
    assert w[p0] / w[p12] == pytest.approx((0.6 / 2) / 0.1)
    flat = restart_weights(graph, seeds, text=text, weighted=False)
    assert flat[0] / flat[3] == pytest.approx(2.0) and flat[p12] / flat[p0] == pytest.approx(2.0)
    # a path between seeds of similarity 0 adds nothing; negative cosines count as 0, not as negative mass
    w = restart_weights(graph, [(0, 0, 0.5), (1, 2, -0.3)], [(0, 2, 1.0, (0, 1, 2), ["p12"])])
    assert w[2] == 0 and w[p12] == 0 and w.min() >= 0


def test_restart_weights_fall_back_to_rank_when_no_seed_is_similar():
    graph = _toy_graph()
    w = restart_weights(graph, [(0, 0, 0.0), (1, 3, -0.1)])
    assert w.sum() == pytest.approx(1.0) and w[0] == pytest.approx(2 * w[3])


def _star_with_two_hub_seeds() -> GraphView:
    # hubs 0 and 1 are adjacent and each has 30 leaves: degree 31 > 1/theta = 20
    src, dst = [0], [1]
    for hub in (0, 1):
        for leaf in range(30):
            src.append(hub)
            dst.append(2 + hub * 30 + leaf)
    names = [f"n{i}" for i in range(62)]
    return GraphView.from_edges(names, np.array(src), np.array(dst))


def test_hub_seeds_pass_their_first_hop_only_with_seed_pass():
    view = _star_with_two_hub_seeds()
    assert prune_paths(view, [0, 1], seed_pass=False) == []
    paths = prune_paths(view, [0, 1], seed_pass=True)
    assert len(paths) == 1 and paths[0].hops == 1 and set(paths[0].nodes) == {0, 1}


def test_query_params_default_to_the_papers_literal_early_stop():
    assert QueryParams().seed_pass is False and QueryParams().resolved().seed_pass is False
    assert QueryParams(seed_pass=True).resolved().seed_pass is True


def test_query_params_check_the_new_options():
    assert QueryParams().chunk_search_for("naive") == "vector"
    assert QueryParams().chunk_search_for("path") == "hybrid"
    assert QueryParams(chunk_search="bm25").chunk_search_for("naive") == "bm25"
    for field, bad in (("chunk_search", "tfidf"), ("seed_search", "x"), ("passages", "random")):
        with pytest.raises(ValueError, match=field):
            QueryParams(**{field: bad}).resolved()


def test_eval_modes_baselines_ablations_and_hops():
    assert resolve_mode("bm25") == ("naive", {"chunk_search": "bm25"})
    assert resolve_mode("path:seed_pass") == ("path", {"seed_pass": True})
    assert "path:literal" not in ABLATIONS  # the literal rule is the default now, not an ablation
    assert "dense" in default_modes(True) and "dense" not in default_modes(False)
    from pathrag_pipeline.evaluation.retrieval_eval import PROMPT_LAYOUT_MODES
    from pathrag_pipeline.query.params import QueryParams

    default_layout = PROMPT_LAYOUT_MODES[QueryParams.prompt]       # the same as path itself: no row of its own
    assert set(ABLATIONS) - {default_layout} <= set(default_modes(False, ablations=True))
    assert default_layout in ABLATIONS and default_layout not in default_modes(False, ablations=True)
    with pytest.raises(ValueError):
        resolve_mode("bogus")
    qs = [QuestionOutcome("a", ["x"], [], {"recall@2": 1.0}, 1.0, 2),
          QuestionOutcome("b", ["x"], [], {"recall@2": 0.0}, 1.0, 2),
          QuestionOutcome("c", ["x"], [], {"recall@2": 0.5}, 1.0, 3),
          QuestionOutcome("d", ["x"], [], {"recall@2": 0.5}, 1.0, None)]
    assert by_hops(qs, ["recall@2"]) == {"2": {"recall@2": 0.5, "questions": 2}, "3": {"recall@2": 0.5, "questions": 1}}
