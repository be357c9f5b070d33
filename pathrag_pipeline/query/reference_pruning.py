"""The public PathRAG code's path retrieval (github.com/BUPT-GAMMA/PathRAG, ``PathRAG/operate.py``), kept for comparison
with the paper's flow (``prune_paths(..., variant="reference")``, ``--variant reference``; query/pruning.py's docstring
says what it does). Not on the default path: query/pruning.py imports it only when this variant is asked for,
and turns its (nodes, edges, score) triples into ``ScoredPath``s.
"""

from __future__ import annotations

import numpy as np

from pathrag_pipeline.query.graph_view import GraphView


def _enumerate_simple_paths(view: GraphView, seeds: list[int], max_hops: int
                            ) -> tuple[dict[tuple[int, int], list[tuple[tuple[int, ...], tuple[int, ...]]]], list[int]]:
    """Every simple path of 1..max_hops edges from each seed to each other seed.

    Equivalent to ``find_paths_and_edges_with_stats``, which runs one DFS per ordered pair and
    returns at the target: one DFS per start that records a path whenever it meets any seed yields,
    for each pair, the same paths in the same (preorder) order, because a simple path to ``t`` never
    continues through ``t``. Neighbours are visited in edge-insertion order, as ``networkx.Graph``
    does. At the last hop only edges into seeds matter, so they come from a per-query index of the
    seeds' neighbours instead of a scan of the whole adjacency.
    Returns paths per ordered pair (node ids, edge ids) and the number of paths per hop count.
    """
    seed_set = set(seeds)
    into_seed: dict[int, list[tuple[int, int]]] = {}
    for t in seeds:
        lo, hi = view.indptr_list[t], view.indptr_list[t + 1]
        for x, e in zip(view.indices[lo:hi].tolist(), view.slot_edge[lo:hi].tolist()):
            into_seed.setdefault(x, []).append((t, e))
    relevant = np.zeros(view.node_count, dtype=bool)
    relevant[list(seed_set)] = True
    relevant[list(into_seed)] = True
    indptr, indices, slot_edge = view.indptr_list, view.indices, view.slot_edge
    paths: dict[tuple[int, int], list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
    hop_counts = [0] * (max_hops + 1)

    def record(nodes: list[int], edges: list[int]) -> None:
        paths.setdefault((nodes[0], nodes[-1]), []).append((tuple(nodes), tuple(edges)))
        hop_counts[len(edges)] += 1

    def extend(nodes: list[int], edges: list[int], on_path: set[int]) -> None:
        depth = len(edges)  # hops so far; the next node sits at depth + 1
        cur = nodes[-1]
        lo, hi = indptr[cur], indptr[cur + 1]
        nbrs = indices[lo:hi]
        eids = slot_edge[lo:hi]
        if depth + 1 < max_hops - 1:
            pairs = zip(nbrs.tolist(), eids.tolist())
        else:  # the next node cannot be passed through to a farther seed beyond the last hop
            sel = np.flatnonzero(relevant[nbrs])
            pairs = zip(nbrs[sel].tolist(), eids[sel].tolist())
        for x, e in pairs:
            if x in on_path:
                continue
            nodes.append(x)
            edges.append(e)
            if x in seed_set:
                record(nodes, edges)
            if depth + 1 == max_hops - 1:
                for t, e2 in into_seed.get(x, ()):
                    if t not in on_path:
                        record(nodes + [t], edges + [e2])
            elif depth + 1 < max_hops - 1:
                on_path.add(x)
                extend(nodes, edges, on_path)
                on_path.discard(x)
            nodes.pop()
            edges.pop()

    if max_hops == 1:
        for s in seeds:
            lo, hi = indptr[s], indptr[s + 1]
            for x, e in zip(indices[lo:hi].tolist(), slot_edge[lo:hi].tolist()):
                if x in seed_set:
                    record([s, x], [e])
    else:
        for s in seeds:
            extend([s], [], {s})
    return paths, hop_counts


def _edge_flow_scores(pair_paths: list[tuple[tuple[int, ...], tuple[int, ...]]], source: int, target: int,
                      *, threshold: float, alpha: float, max_hops: int) -> list[float]:
    """Mean edge resource of each path of one ordered pair, as ``bfs_weighted_paths`` computes it.

    ``follow[u]`` is the set of successors of ``u`` over the pair's paths. The first hop gives edge
    (source, v) ``1/|follow[source]|``; a later hop from ``u`` to ``w`` adds
    ``weight(prev, u) * alpha / |follow[u]|`` to edge (u, w). Spreading continues from an edge
    only while its accumulated weight exceeds ``threshold``, never past the target, and at most
    ``max_hops`` hops deep (3 in the public code).
    The public code keeps ``follow`` as Python sets of names, so its iteration order follows string
    hashing (PYTHONHASHSEED); that order is only visible when one edge collects weight at two depths
    before its threshold test. We iterate in first-seen order, which makes the result reproducible.
    """
    follow: dict[int, dict[int, None]] = {}
    for nodes, _ in pair_paths:
        for u, v in zip(nodes[:-1], nodes[1:]):
            follow.setdefault(u, {})[v] = None
    weights: dict[tuple[int, int], float] = {}

    def spread(u: int, incoming: float, depth: int) -> None:
        succ = follow[u]
        for w in succ:
            edge = (u, w)
            weights[edge] = weights.get(edge, 0.0) + incoming / len(succ)
            if w == target:
                continue
            if depth < max_hops and weights[edge] > threshold:
                spread(w, weights[edge] * alpha, depth + 1)

    spread(source, 1.0, 1)
    return [sum(weights.get((u, v), 0.0) for u, v in zip(nodes[:-1], nodes[1:])) / (len(nodes) - 1)
            for nodes, _ in pair_paths]


def reference_paths(view: GraphView, seeds: list[int], *, alpha: float, threshold: float, max_hops: int,
                    top_k: int) -> list[tuple[tuple[int, ...], tuple[int, ...], float]]:
    """``_find_most_related_edges_from_entities3`` of the public code, on node ids.

    Deviations, both invisible on graphs without those ambiguities: successor sets are iterated in
    first-seen order (see :func:`_edge_flow_scores`), and repeated seeds are dropped up front.
    """
    per_pair, hop_counts = _enumerate_simple_paths(view, seeds, max_hops)
    scored: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []
    for s in seeds:
        for t in seeds:
            pair_paths = per_pair.get((s, t)) if s != t else None
            if not pair_paths:
                continue
            scores = _edge_flow_scores(pair_paths, s, t, threshold=threshold, alpha=alpha, max_hops=max_hops)
            scored.extend((score, nodes, edges) for (nodes, edges), score in zip(pair_paths, scores))
    scored.sort(key=lambda item: item[0], reverse=True)  # stable, like Python's sorted(..., reverse=True)
    keep = min(top_k, sum(count // 2 for count in hop_counts))
    seen: set[tuple[int, ...]] = set()
    kept: list[tuple[tuple[int, ...], tuple[int, ...], float]] = []
    for score, nodes, edges in scored:
        if len(kept) == keep:
            break
        key = tuple(sorted(nodes))
        if key not in seen:
            seen.add(key)
            kept.append((nodes, edges, score))
    return kept
