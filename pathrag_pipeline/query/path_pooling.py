"""Path Pooling (Wang, Feng, Xie & Zhou 2025, arXiv:2503.05203): train-free smoothing of relation scores along
shortest paths from the query entities, used to reorder (``rerank``) or to choose (``reselect``) the paths of
path mode's context.

Our reading of the method, mapped onto PathRAG (the paper scores the triples of a retrieved subgraph, SubgraphRAG
style; here the relations of the pruned paths play that part):

1. **Relation scores.** Every candidate relation ``r`` gets its relevance to the question,
   ``s(r) = max(0, cos(question, r))``, from the relation vectors already in LanceDB (the configured embedder).
2. **Path kernels.** Over the subgraph of the candidate relations, a breadth-first search from the query
   entities (the seed entities of the query) gives each reachable entity one shortest path from its nearest
   query entity: its kernel. Ties go to the better-ranked seed, then to the smaller id (deterministic).
3. **Path-centric mean pooling.** A kernel's score is the mean of ``s`` over its relations; a relation's
   pooled score ``p(r)`` is the mean of the scores of the kernels it lies on (``s(r)`` itself when none).
4. **Positional bonus.** A relation whose nearer end is ``d`` hops from a query entity (``d = 1`` when it touches
   one) gets ``POSITION_BONUS / d``: the paper favours triples near the topic entities.
5. **Smoothed score.** ``s'(r) = (1 - SMOOTHING) * s(r) + SMOOTHING * p(r) + POSITION_BONUS / d(r)``, and a
   path's score is the mean of ``s'`` over its relations.

That is our variant (``variant="ours"``, kept for comparison in ``query/path_pooling_ours.py``). The default is the paper's Algorithm 1 (003_9db30f8cbae2c0cd.txt, lines
272-289 and Sec. 3.3), ``variant="paper"`` (:func:`paper_scores`; issue 24), which differs from ours in four ways: a kernel's triples all get the kernel's mean score with no
interpolation with their own score (Alg. 1 lines 5-6); the positional score is ``s_min / (i * a)`` for the
i-th triple of the kernel, ``s_min`` the smallest score of all candidate triples (line 9: relative, where our
bonus is an absolute 0.1 / d); a triple on several kernels keeps the **maximum** of its kernel scores (line 10),
not their mean; and a triple on no kernel is a one-hop kernel of its own (Sec. 3.3: "we treat them as single-hop
paths"). Readings of ours where the paper is silent: ``a = POSITION_A = 1`` (the paper says only "a nonzero
constant" and reports no value); the kernels are this module's breadth-first shortest paths over the undirected
subgraph, one per reachable entity (the paper's Dijkstra over unit weights, ``p_{e->v}`` and ``p_{v->e}``
coinciding when edges are undirected); a triple that is reachable but lies on no shortest-path kernel (a
cross edge) counts as "single-hop" too, since Algorithm 1 would otherwise give it no score.

``rerank`` keeps the pruned paths and orders them by that score (the prompt still lists them in ascending
order, best last, as PathRAG does); ``reselect`` prunes a pool of ``RESELECT_POOL`` times ``top_k`` paths and keeps
the ``top_k`` best by that score. The constants are the plain choices (equal-weight smoothing, a bonus of one
tenth of the score range at the first hop), set before measuring and not tuned.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pathrag_pipeline.query.params import PATH_POOLINGS, POOL_VARIANTS

RESELECT_POOL = 3
POSITION_A = 1.0     # the paper's positional constant a ("a nonzero constant", no value given): our reading


@dataclass(frozen=True)
class PooledPath:
    """A candidate path with its Path Pooling score (mean smoothed relation score)."""

    index: int          # position in the candidate list given
    score: float


def relation_scores(question_vector: np.ndarray, keys: Sequence[str], row_of: Mapping[str, int],
                    matrix: np.ndarray) -> dict[str, float]:
    """``s(r)``: cosine of the question vector with each relation's stored unit vector, clipped at 0
    (relations without a vector score 0)."""
    q = np.asarray(question_vector, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm > 0:
        q = q / norm
    out: dict[str, float] = {}
    for key in dict.fromkeys(keys):
        row = row_of.get(key)
        out[key] = max(0.0, float(matrix[row] @ q)) if row is not None and matrix.size else 0.0
    return out


def kernels(query_nodes: Sequence[int], edges: Sequence[tuple[int, int, str]]) -> tuple[list[list[str]], dict[str, int]]:
    """Shortest-path kernels from the query entities over the subgraph ``edges`` (node, node, relation key).

    Returns the kernels (relation keys from a query entity outwards, one per reachable non-query entity) and
    each relation's distance ``d`` (1 + the hop distance of its nearer end from a query entity).
    """
    adjacency: dict[int, list[tuple[int, str]]] = {}
    for a, b, key in edges:
        adjacency.setdefault(a, []).append((b, key))
        adjacency.setdefault(b, []).append((a, key))
    for neighbours in adjacency.values():
        neighbours.sort(key=lambda x: (x[0], x[1]))
    parent: dict[int, tuple[int, str] | None] = {}
    depth: dict[int, int] = {}
    queue: deque[int] = deque()
    for node in dict.fromkeys(query_nodes):
        if node in adjacency and node not in parent:
            parent[node] = None
            depth[node] = 0
            queue.append(node)
    while queue:
        node = queue.popleft()
        for nxt, key in adjacency[node]:
            if nxt not in parent:
                parent[nxt] = (node, key)
                depth[nxt] = depth[node] + 1
                queue.append(nxt)
    out: list[list[str]] = []
    for node, link in parent.items():
        if link is None:
            continue
        chain: list[str] = []
        at: int = node
        while parent[at] is not None:
            prev, key = parent[at]  # type: ignore[misc]
            chain.append(key)
            at = prev
        out.append(chain[::-1])
    distance: dict[str, int] = {}
    for a, b, key in edges:
        near = min(depth.get(a, len(parent) + 1), depth.get(b, len(parent) + 1))
        d = near + 1
        distance[key] = min(distance.get(key, d), d)
    return out, distance


def paper_scores(scores: Mapping[str, float], kernel_list: Sequence[Sequence[str]]) -> dict[str, float]:
    """The paper's Algorithm 1 for every scored triple (relation): per kernel ``p = (t_1 .. t_l)``,
    ``S(t_i) = mean(s over p) + s_min / (i * a)``; a triple's score is the max of ``S`` over the kernels holding
    it; a triple on no kernel is the one-hop kernel ``(t)``, so it scores ``s(t) + s_min / a``."""
    if not scores:
        return {}
    s_min = min(scores.values())
    out: dict[str, float] = {}
    covered: set[str] = set()
    for kernel in [*kernel_list, *([key] for key in scores)]:
        if not kernel:
            continue
        if len(kernel) == 1 and kernel[0] in covered:
            continue   # the one-hop kernels are only for triples no other kernel holds
        base = sum(scores.get(k, 0.0) for k in kernel) / len(kernel)
        for i, key in enumerate(kernel, start=1):
            if key not in scores:
                continue
            value = base + s_min / (i * POSITION_A)
            out[key] = max(out.get(key, value), value)
            covered.add(key)
    return out


def pool_paths(paths: Sequence[Sequence[tuple[int, int, str]]], query_nodes: Sequence[int],
               scores: Mapping[str, float], variant: str = "ours") -> list[PooledPath]:
    """Path Pooling scores of candidate paths, each given as its relations ``(node, node, relation key)`` in order.

    Best first; ties keep the candidates' order (their reliability order from pruning). ``variant``: "ours"
    (``path_pooling_ours.smoothed_scores``) or "paper" (:func:`paper_scores`, Algorithm 1).
    """
    if variant not in POOL_VARIANTS:
        raise ValueError(f"pool_variant={variant!r} is not one of {', '.join(POOL_VARIANTS)}")
    edges = [e for path in paths for e in path]
    kernel_list, distance = kernels(query_nodes, edges)
    triples = {key: scores.get(key, 0.0) for _, _, key in edges}
    if variant == "paper":
        smooth = paper_scores(triples, kernel_list)
    else:   # ours, kept for comparison: imported only when asked for
        from pathrag_pipeline.query.path_pooling_ours import smoothed_scores
        smooth = smoothed_scores(triples, kernel_list, distance)
    pooled = [PooledPath(i, sum(smooth[k] for _, _, k in p) / len(p) if p else 0.0) for i, p in enumerate(paths)]
    return sorted(pooled, key=lambda p: (-p.score, p.index))


def apply_pooling(scored: Sequence, how: str, top_k: int, path_relations, query_nodes: Sequence[int],
                  scores: Mapping[str, float], variant: str = "ours") -> list:
    """Reorder (``rerank``) or choose (``reselect``: the ``top_k`` best of the pool) pruned paths by Path Pooling.

    ``scored`` are the pruner's paths, best first; ``path_relations(path)`` gives a path's relations as
    ``(node, node, relation key)``. The paths keep their reliability (``score``); only their order (and, for
    ``reselect``, which of them are kept) follows the pooling score, best first.
    """
    if how not in PATH_POOLINGS:
        raise ValueError(f"path_pooling={how!r} is not one of {', '.join(PATH_POOLINGS)}")
    if how == "off" or not scored:
        return list(scored)
    ranked = pool_paths([path_relations(p) for p in scored], query_nodes, scores, variant)
    if how == "reselect":
        ranked = ranked[:top_k]
    return [scored[p.index] for p in ranked]
