"""Path Pooling: kernels from the query entities, mean pooling, the positional bonus, rerank and reselect."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pathrag_pipeline.query import path_pooling
from pathrag_pipeline.query.path_pooling import (
    apply_pooling,
    kernels,
    pool_paths,
    relation_scores,
    smoothed_scores,
)


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
    s, bonus = path_pooling.SMOOTHING, path_pooling.POSITION_BONUS
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
