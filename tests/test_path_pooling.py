"""Path Pooling: kernels from the query entities, mean pooling, the positional bonus, rerank and reselect."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pathrag_pipeline.query import path_pooling, path_pooling_ours
from pathrag_pipeline.query.path_pooling import apply_pooling, kernels, pool_paths, relation_scores
from pathrag_pipeline.query.path_pooling_ours import smoothed_scores


def test_kernels_are_shortest_paths_from_the_nearest_query_entity():
    # 0 -a- 1 -b- 2 -c- 3, and a shortcut 0 -d- 3
    edges = [(0, 1, "a"), (1, 2, "b"), (2, 3, "c"), (0, 3, "d")]
    got, distance = kernels([0], edges)
    assert sorted(got) == sorted([["a"], ["a", "b"], ["d"]])
    assert distance == {"a": 1, "b": 2, "c": 2, "d": 1}
    # with two query entities every relation is at most one step from one of them
    _, distance = kernels([0, 2], edges)
    assert set(distance.values()) == {1}


def test_mean_pooling_lifts_a_weak_relation_on_a_strong_kernel_and_the_bonus_favours_the_first_hop():
    scores = {"a": 0.9, "b": 0.1, "x": 0.1}
    kernel_list = [["a"], ["a", "b"], ["x"]]
    distance = {"a": 1, "b": 2, "x": 1}
    got = smoothed_scores(scores, kernel_list, distance)
    s, bonus = path_pooling_ours.SMOOTHING, path_pooling_ours.POSITION_BONUS
    # b lies on the kernel a-b (mean 0.5): pooled 0.5, second hop
    assert got["b"] == pytest.approx((1 - s) * 0.1 + s * 0.5 + bonus / 2)
    # x has the same own score but its kernel is weak
    assert got["x"] == pytest.approx(0.1 + bonus)
    assert got["b"] > got["x"] - bonus  # pooling lifted b above x apart from the position bonus


def test_relation_scores_are_clipped_cosines_and_missing_vectors_score_zero():
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    rows = {"r0": 0, "r1": 1, "r2": 2}
    got = relation_scores(np.array([2.0, 0.0]), ["r0", "r1", "r2", "gone"], rows, matrix)
    assert got == {"r0": pytest.approx(1.0), "r1": 0.0, "r2": 0.0, "gone": 0.0}


@dataclass(frozen=True)
class _Path:
    nodes: tuple[int, ...]
    score: float


def _relations(path: _Path) -> list[tuple[int, int, str]]:
    return [(a, b, f"{min(a, b)}-{max(a, b)}") for a, b in zip(path.nodes, path.nodes[1:])]


def test_rerank_orders_by_pooled_score_and_reselect_keeps_the_best_of_the_pool():
    # query entity 0; the pruner's order (reliability) puts the irrelevant path 5-6 first
    paths = [_Path((5, 6), 0.9), _Path((0, 1), 0.5), _Path((0, 1, 2), 0.4)]
    scores = {"5-6": 0.0, "0-1": 0.8, "1-2": 0.6}
    reranked = apply_pooling(paths, "rerank", 2, _relations, [0], scores)
    assert [p.nodes for p in reranked] == [(0, 1), (0, 1, 2), (5, 6)]
    assert [p.score for p in reranked] == [0.5, 0.4, 0.9]   # reliability is kept, only the order changes
    reselected = apply_pooling(paths, "reselect", 2, _relations, [0], scores)
    assert [p.nodes for p in reselected] == [(0, 1), (0, 1, 2)]
    assert apply_pooling(paths, "off", 2, _relations, [0], scores) == paths
    with pytest.raises(ValueError, match="path_pooling='sideways'"):
        apply_pooling(paths, "sideways", 2, _relations, [0], scores)


def test_pool_paths_breaks_ties_by_the_given_order():
    paths = [[(0, 1, "a")], [(0, 2, "b")]]
    got = pool_paths(paths, [0], {"a": 0.5, "b": 0.5})
    assert [p.index for p in got] == [0, 1]


# ---- the paper's Algorithm 1 (variant "paper") ----------------------------------------------------------

def test_paper_variant_gives_each_triple_its_kernel_mean_plus_a_relative_positional_score():
    # kernels from query entity 0: [a], [a, b]; x is on no kernel (a one-hop kernel of its own)
    scores = {"a": 0.9, "b": 0.1, "x": 0.2}
    got = path_pooling.paper_scores(scores, [["a"], ["a", "b"]])
    s_min, a = 0.1, path_pooling.POSITION_A
    # a: max over its kernels [a] (0.9 + s_min/a) and [a, b] (0.5 + s_min/a): the max, not the mean
    assert got["a"] == pytest.approx(0.9 + s_min / a)
    # b: second triple of [a, b]: the kernel mean alone, no interpolation with its own 0.1
    assert got["b"] == pytest.approx(0.5 + s_min / (2 * a))
    # x: unreachable, scored as its own one-hop kernel
    assert got["x"] == pytest.approx(0.2 + s_min / a)


def test_paper_and_ours_rank_differently_where_the_paper_takes_the_max_over_kernels():
    # query entity 0; path 0 = 0-3 (one middling hop); path 1 = 0-1-2 (a strong first hop, a weak second).
    # paper (s_min 0.2): s keeps the max of its kernels, 0.9 + 0.2, w = 0.55 + 0.2 / 2, path 1 = (1.1 + 0.65) / 2
    # = 0.875 > 0.8 = 0.6 + 0.2;
    # ours: s is pulled to its kernels' mean and the absolute bonus favours the one-hop path (0.7 > 0.669)
    paths = [[(0, 3, "m")], [(0, 1, "s"), (1, 2, "w")]]
    scores = {"m": 0.6, "s": 0.9, "w": 0.2}
    paper = pool_paths(paths, [0], scores, "paper")
    ours = pool_paths(paths, [0], scores, "ours")
    assert [(p.index, round(p.score, 3)) for p in paper] == [(1, 0.875), (0, 0.8)]
    assert [p.index for p in ours] == [0, 1]
    with pytest.raises(ValueError, match="pool_variant='book'"):
        pool_paths(paths, [0], scores, "book")


def test_pool_variant_is_logged_only_where_it_is_read():
    from pathrag_pipeline.query.params import QueryParams, mode_params

    assert "pool_variant" not in mode_params("path", QueryParams())
    assert mode_params("path", QueryParams(path_pooling="rerank", pool_variant="paper"))["pool_variant"] == "paper"
    assert "pool_variant" not in mode_params("naive", QueryParams(path_pooling="rerank"))
    with pytest.raises(ValueError, match="pool_variant='x'"):
        QueryParams(pool_variant="x").resolved()
