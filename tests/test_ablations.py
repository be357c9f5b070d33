"""The ablations that revert a tuned path-mode choice (QueryParams.revert) and the table of tuned choices."""

from __future__ import annotations

import numpy as np
import pytest

from pathrag_pipeline.evaluation.retrieval_eval import (
    ABLATIONS,
    NEUROPATH_ABLATIONS,
    TUNED_CHOICES,
    adoption,
    resolve_mode,
    tuned_choices_markdown,
    tuned_minus_simpler,
)
from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.engine import PathRAG
from pathrag_pipeline.query.params import REVERTIBLE, QueryParams
from pathrag_pipeline.query.ranking import PassageGraph, restart_weights
from tests.query_fixtures import build_tiny_index

QUESTION = "Where was the founder of Aldermere University born?"


@pytest.fixture
def settings(tmp_path):
    graph_cache.clear_cache()
    return build_tiny_index(tmp_path / "home")


def test_every_tuned_choice_names_an_ablation_that_exists_and_every_revert_has_one():
    rows = {c.ablation for c in TUNED_CHOICES if c.ablation}
    assert rows <= set(ABLATIONS) | set(NEUROPATH_ABLATIONS)
    assert len(TUNED_CHOICES) == 14
    reverted = {r for name in ABLATIONS for r in resolve_mode(name)[1].get("revert", ())}
    assert reverted == set(REVERTIBLE)
    assert all(resolve_mode(name)[0] == "path" for name in rows)
    with pytest.raises(ValueError, match="revert=.*question_seed"):
        QueryParams(revert=("bogus",)).resolved()
    assert QueryParams(revert=["damping"]).resolved().revert == ("damping",)


def test_min_ends_weighs_a_path_by_its_weaker_end_seed():
    # entities 0-1-2 in a chain; p0 (entity 0), p12 (entities 1 and 2)
    graph = PassageGraph(3, [0, 1], [1, 2], [("p0",), ("p12",), ("p12",)])
    seeds = [(0, 0, 0.8), (1, 2, 0.6)]           # weights 0.8 and 0.6 / 2 = 0.3
    path = [(0, 2, 1.0, (0, 1, 2), ["p12"])]
    p12 = graph.entity_count + graph.chunk_index["p12"]
    product = restart_weights(graph, seeds, path)
    weaker = restart_weights(graph, seeds, path, min_ends=True)
    assert product[p12] / product[0] == pytest.approx(0.8 * 0.3 / 0.8)
    assert weaker[p12] / weaker[0] == pytest.approx(0.3 / 0.8)


def test_damping_changes_how_far_the_walk_spreads():
    graph = PassageGraph(3, [0, 1], [1, 2], [("p0",), ("p1",), ("p2",)])
    restart = np.zeros(graph.n)
    restart[0] = 1.0
    far = graph.entity_count + graph.chunk_index["p2"]
    assert graph.pagerank(restart, 0.5)[far] < graph.pagerank(restart, 0.85)[far]


def test_pagerank_is_the_power_iteration_of_the_transition_matrix():
    """Against the same walk written densely: edges both ways, one per node pair, each node's mass split evenly
    over its neighbours; a node with no edge (entity 3: no relation, no passage) gives its mass to the restart."""
    from pathrag_pipeline.query.ranking import PPR_MAX_ITER, PPR_TOL

    graph = PassageGraph(4, [0, 1, 1], [1, 2, 2], [("p0", "p1"), ("p1",), (), ()])
    n = graph.n
    step = np.zeros((n, n))
    for s, d in zip(graph.src, graph.dst):
        step[d, s] = 1.0
    degree = step.sum(axis=0)
    step[:, degree > 0] /= degree[degree > 0]
    restart = np.zeros(n)
    restart[[0, 3]] = [0.25, 0.75]
    r = restart.copy()
    for _ in range(PPR_MAX_ITER):
        r, before = 0.85 * step @ r + (0.15 + 0.85 * r[degree == 0].sum()) * restart, r
        if np.abs(r - before).sum() < PPR_TOL:
            break
    assert np.allclose(graph.pagerank(restart), r, rtol=0, atol=1e-12)
    assert graph.pagerank(restart).sum() == pytest.approx(1.0)


def test_reverted_choices_change_the_seeds_and_the_query_log_says_so(settings):
    rag = PathRAG(settings, record=False)
    default = rag.query(QUESTION, answer=False)
    # the recheck reverted the whole-question seed query: the default seeds come from the keywords alone
    assert default.retrieved and QUESTION not in {n.keyword for n in default.retrieved}
    assert list(default.params["revert"]) == ["question_seed", "both_ends"]        # logged in queries.params
    assert default.params["seed_search"] == "vector" and default.params["passages"] == "no_paths"
    with_question = rag.query(QUESTION, answer=False, revert=("both_ends",))
    assert QUESTION in {n.keyword for n in with_question.retrieved}
    # an exact name match heads its keyword's seeds with similarity 1.0; reverted, no seed gets it for free
    exact = rag.query("Helena Voss", answer=False)
    assert (exact.retrieved[0].entity_key, exact.retrieved[0].similarity) == ("helena voss", 1.0)
    plain = rag.query("Helena Voss", answer=False, revert=("exact_name",))
    assert all(n.similarity < 1.0 for n in plain.retrieved)
    for revert in (("both_ends",), ("damping",), ("similarity",)):
        assert rag.query(QUESTION, answer=False, revert=revert, passages="fused").chunk_ids   # still ranks
    assert "revert" not in rag.query(QUESTION, "naive", answer=False).params


def test_every_tuned_choice_has_its_ablation_and_the_adoption_rule_reads_both_graphs():
    for c in TUNED_CHOICES:
        assert c.ablation is None or c.ablation in ABLATIONS, c
    ahead = {"diff": 0.02, "low": 0.01, "high": 0.03, "outcome": "beats"}
    level = {"diff": 0.0, "low": -0.01, "high": 0.01, "outcome": "ties"}
    behind = {"diff": -0.02, "low": -0.03, "high": -0.01, "outcome": "trails"}
    kept = next(c for c in TUNED_CHOICES if c.ablation == "path:unweighted")
    departure = next(c for c in TUNED_CHOICES if c.ablation == "path:paths_in_walk")
    assert adoption(kept, [ahead, level]) == "adopted (the default)"
    assert adoption(kept, [level, level]).startswith("FAILS") and adoption(kept, [ahead, behind]).startswith("FAILS")
    assert adoption(departure, [level, level]).startswith("not adopted")
    assert adoption(departure, [ahead, None]).startswith("ADOPT")


def test_the_tuned_choices_table_reads_tuned_minus_simpler_from_a_run():
    by_name = {c.ablation: c for c in TUNED_CHOICES}
    run = {"use_triples": True, "embedder_runtime": "st-onnx:all-MiniLM-L6-v2", "modes": {
        "path": {},
        "path:unweighted": {"vs": "path", "delta": {"mean_recall": {"diff": -0.04, "low": -0.07, "high": -0.01,
                                                                     "outcome": "trails"}}},
        "path:paths_in_walk": {"vs": "path", "delta": {"mean_recall": {"diff": 0.01, "low": -0.02, "high": 0.03,
                                                                        "outcome": "ties"}}}}}
    # ablation - path = -0.04 [-0.07, -0.01]: the tuned rule (the default) leads, beyond noise
    assert tuned_minus_simpler(by_name["path:unweighted"], run) == {"diff": 0.04, "low": 0.01, "high": 0.07,
                                                                   "outcome": "beats"}
    assert tuned_minus_simpler(by_name["path:paths_in_walk"], run)["outcome"] == "ties"   # departure - default
    assert tuned_minus_simpler(by_name["path:legacy"], run) is None
    table = tuned_choices_markdown([run])
    assert "triples, st-onnx:all-MiniLM-L6-v2" in table
    assert "+0.040 [+0.010, +0.070] beats" in table and "+0.010 [-0.020, +0.030] ties" in table
    assert "adopted (the default)" in table and "not adopted (the default is the simpler rule)" in table
    assert "not run" in table
    assert tuned_choices_markdown().count("TODO") >= 2 * 13
