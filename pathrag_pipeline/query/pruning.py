"""Flow-based path pruning (PathRAG, Chen et al. 2025, Sec. 4.2): keep the few most reliable
relational paths between the entity nodes a query retrieved.

Two variants share one entry point, :func:`prune_paths`:

``variant="paper"`` follows the paper's equations.

* Resource flow (Eq. 2). For every retrieved node taken as start, ``S(start) = 1``. Resource moves
  breadth-first, one layer per hop: a node ``v`` of layer ``k`` that propagates hands
  ``alpha * S(v) / deg(v)`` to each neighbour that has no resource yet, and those neighbours form
  layer ``k+1``. Eq. 2 defines ``S(v_i)`` as a *sum* over the neighbours pointing to ``v_i``, so a node
  reached from several parents of the same layer receives the sum of their shares. A node's resource
  is set once, by the layer that first reaches it; later layers never add to it (no flow back).
  ``deg`` is the full degree, so the share sent towards already-reached neighbours is lost, which is
  what makes resource decay with distance.
* Early stop (Eq. 3). A node with ``S(v) / deg(v) < theta`` receives resource but does not pass it on, and
  nothing propagates beyond ``max_hops`` hops. The hop cap is ours (4 by default): the paper has none and stresses
  that its flow is not a hop limit. Under the early stop a layer-k node holds at most ``alpha**k`` and passes it on
  only if that is at least ``theta``, so no flow goes past ``log(theta) / log(alpha)`` hops (13.4 at the
  defaults): ``max_hops=14`` is the paper's uncapped flow. The cap bounds the path length a prompt shows.
* Why this is fast. Per layer the total resource is at most ``alpha**k`` (each node forwards at most
  ``alpha`` of what it holds). A node propagates only if ``deg(v) <= S(v) / theta``, so the edges
  scanned per start node sum to at most ``sum_k alpha**k / theta = 1 / ((1 - alpha) * theta)``
  (100 at the defaults), whatever the graph size. Hubs cost nothing: a node of degree 10^4 would
  need ``S >= 500`` to propagate, so it is never fanned out; it can still *receive* resource and end
  a path. No extra skipping rule is needed, and none is applied, so the semantics stay the paper's.
* The literal early stop is the default, for queries too (``seed_pass=False``). Read literally, it keeps a
  retrieved node of degree above ``1/theta`` (20) from propagating at all, so two adjacent hub seeds get no
  path, not even their shared edge. ``seed_pass=True`` is our optional departure: the start node always hands
  out its first hop and the early stop applies from the second layer on. It was the query default once and
  was not kept: on musique-100 it gained nothing measurable (recall equal with MiniLM, one question's worth at
  R@2 only offline), while it voids the cost bound above for the seeds, whose first hop then scans their full
  degree: on 40 hub seeds at 1M edges it costs up to ~700x the literal rule (``pathrag bench pruning``).
* Candidate paths. Flow edges run from layer ``k`` to ``k+1``, so the paths along which resource
  reached an end node all have ``layer(end)`` edges. For every pair of retrieved nodes the best of
  them by reliability (Eq. 4) ``S(P) = sum of S over the path's nodes / number of edges`` is found by
  dynamic programming over the layered flow (ties: the parent reached first in BFS order). Both
  directions of a pair are scored, each with its own start's flow; the pair keeps the better one
  (ties: the direction whose start comes first in ``seeds``). Paths may pass through other retrieved
  nodes.
* Selection. All pair paths are ordered (``ordering``) and the first ``top_k`` are returned:
  ``"reliability"`` (descending score, then fewer hops, then discovery order) as in the paper;
  ``"hop_first"`` (fewer hops first, then score) and ``"random"`` (seeded shuffle) for the paper's
  ablations.

``variant="reference"`` reproduces the public code (github.com/BUPT-GAMMA/PathRAG, ``PathRAG/operate.py``):
``find_paths_and_edges_with_stats`` enumerates every simple path of at most 3 hops between every
ordered pair of retrieved nodes by DFS; ``bfs_weighted_paths`` spreads resource on *edges* of the
union of a pair's paths (1/out-degree on the first hop, then ``alpha * w / out-degree`` while the
edge weight exceeds the threshold 0.3) and scores each path by its mean edge weight;
``_find_most_related_edges_from_entities3`` sorts all paths by that score (stable, descending),
drops paths whose node set was already seen, and keeps ``min(15, sum over hop counts h of
int(#h-hop paths / 2))``. See :func:`_reference_paths` for the two places where we had to pick an order.

Both variants return paths best first; the prompt renderer reverses them (the public code and the
paper put the most reliable path last, next to the question).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathrag_pipeline.query.graph_view import GraphView
from pathrag_pipeline.query.params import DEFAULT_MAX_HOPS, DEFAULT_THETA, ORDERINGS, VARIANTS  # noqa: F401 (re-exported)



@dataclass(frozen=True)
class ScoredPath:
    """One relational path: node ids from ``source`` to ``target`` and the edge ids joining them."""

    nodes: tuple[int, ...]
    edges: tuple[int, ...]
    score: float
    hops: int
    source: int
    target: int


def prune_paths(
    view: GraphView,
    seeds: Sequence[int],
    *,
    alpha: float = 0.8,
    theta: float | None = None,
    max_hops: int | None = None,
    top_k: int = 15,
    variant: str = "paper",
    ordering: str = "reliability",
    rng_seed: int = 0,
    seed_pass: bool = False,
) -> list[ScoredPath]:
    """Return at most ``top_k`` reliable paths between the retrieved nodes ``seeds``, best first.

    ``theta`` and ``max_hops`` default per variant: 0.05 and 4 hops for ``"paper"``, 0.3 and 3 hops
    (the public code's constants) for ``"reference"``. Repeated seeds are ignored after their first
    occurrence. The result depends only on the inputs (stable tie-breaking; ``rng_seed`` for
    ``ordering="random"``).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering={ordering!r} is not one of {ORDERINGS}")
    if variant == "reference" and ordering != "reliability":
        raise ValueError(f"ordering={ordering!r} applies to the paper variant only; the reference keeps its own order")
    theta = DEFAULT_THETA[variant] if theta is None else theta
    max_hops = DEFAULT_MAX_HOPS[variant] if max_hops is None else max_hops
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1]; the paper uses 0.8")
    if theta < 0.0:
        raise ValueError(f"theta={theta!r} must be >= 0")
    if max_hops < 1:
        raise ValueError(f"max_hops={max_hops!r} must be >= 1")
    if top_k < 0:
        raise ValueError(f"top_k={top_k!r} must be >= 0")
    n = view.node_count
    unique: list[int] = []
    seen: set[int] = set()
    for s in seeds:
        s = int(s)
        if not 0 <= s < n:
            raise ValueError(f"seed node id {s} is outside the graph (0..{n - 1}); map names with GraphView.ids_for")
        if s not in seen:
            seen.add(s)
            unique.append(s)
    if top_k == 0 or len(unique) < 2:
        return []
    if variant == "reference":
        return _reference_paths(view, unique, alpha=alpha, threshold=theta, max_hops=max_hops, top_k=top_k)
    return _paper_paths(view, unique, alpha=alpha, theta=theta, max_hops=max_hops, top_k=top_k,
                        ordering=ordering, rng_seed=rng_seed, seed_pass=seed_pass)


# ---- paper variant -------------------------------------------------------------------------------

@dataclass
class Flow:
    """Resource reached from one start node: ``resource[v]`` is S(v) (Eq. 2), ``layer[v]`` its hop
    distance, ``parent[v]`` = (best parent, edge id) and ``best_sum[v]`` the largest sum of S over a
    flow path start..v (the numerator of Eq. 4)."""

    start: int
    resource: dict[int, float]
    layer: dict[int, int]
    parent: dict[int, tuple[int, int]]
    best_sum: dict[int, float]

    def path_to(self, target: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Nodes and edge ids of the best flow path from the start to ``target``."""
        nodes = [target]
        edges: list[int] = []
        v = target
        while v != self.start:
            v, e = self.parent[v]
            nodes.append(v)
            edges.append(e)
        return tuple(reversed(nodes)), tuple(reversed(edges))


def propagate(view: GraphView, start: int, *, alpha: float, theta: float, max_hops: int,
              seed_pass: bool = False) -> Flow:
    """Breadth-first resource flow from ``start`` with early stopping (see module docstring)."""
    deg = view.degree_list
    indptr = view.indptr_list
    indices = view.indices
    slot_edge = view.slot_edge
    resource = {start: 1.0}
    layer = {start: 0}
    parent: dict[int, tuple[int, int]] = {}
    best_sum = {start: 1.0}
    frontier = [start]
    for depth in range(1, max_hops + 1):
        received: dict[int, float] = {}
        via: dict[int, tuple[int, int]] = {}
        via_sum: dict[int, float] = {}
        for v in frontier:
            d = deg[v]
            if d == 0 or (resource[v] / d < theta and not (seed_pass and depth == 1)):
                continue  # early stop: v keeps its resource but passes none on
            share = alpha * resource[v] / d
            lo, hi = indptr[v], indptr[v + 1]
            bs = best_sum[v]
            for u, e in zip(indices[lo:hi].tolist(), slot_edge[lo:hi].tolist()):
                if u in resource:
                    continue  # reached by an earlier layer: its resource is final
                if u in received:
                    received[u] += share
                    if bs > via_sum[u]:
                        via[u] = (v, e)
                        via_sum[u] = bs
                else:
                    received[u] = share
                    via[u] = (v, e)
                    via_sum[u] = bs
        if not received:
            break
        for u, s in received.items():
            resource[u] = s
            layer[u] = depth
            parent[u] = via[u]
            best_sum[u] = via_sum[u] + s
        frontier = list(received)
    return Flow(start, resource, layer, parent, best_sum)


def _paper_paths(view: GraphView, seeds: list[int], *, alpha: float, theta: float, max_hops: int,
                 top_k: int, ordering: str, rng_seed: int, seed_pass: bool = False) -> list[ScoredPath]:
    best: dict[tuple[int, int], ScoredPath] = {}
    for start in seeds:
        flow = propagate(view, start, alpha=alpha, theta=theta, max_hops=max_hops, seed_pass=seed_pass)
        if len(flow.resource) == 1:
            continue
        for target in seeds:
            if target == start or target not in flow.resource:
                continue
            hops = flow.layer[target]
            score = flow.best_sum[target] / hops
            key = (start, target) if start < target else (target, start)
            kept = best.get(key)
            if kept is None or score > kept.score:
                nodes, edges = flow.path_to(target)
                best[key] = ScoredPath(nodes, edges, score, hops, start, target)
    candidates = list(best.values())  # discovery order: by start, then by target, in seed order
    return order_paths(candidates, ordering, rng_seed)[:top_k]


def order_paths(paths: list[ScoredPath], ordering: str, rng_seed: int = 0) -> list[ScoredPath]:
    """Order candidate paths for top-K selection; stable, so equal keys keep discovery order."""
    by_reliability = sorted(paths, key=lambda p: (-p.score, p.hops))
    if ordering == "reliability":
        return by_reliability
    if ordering == "hop_first":
        return sorted(paths, key=lambda p: (p.hops, -p.score))
    if ordering == "random":
        random.Random(rng_seed).shuffle(by_reliability)
        return by_reliability
    raise ValueError(f"ordering={ordering!r} is not one of {ORDERINGS}")


# ---- reference variant (public PathRAG code) -----------------------------------------------------

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


def _reference_paths(view: GraphView, seeds: list[int], *, alpha: float, threshold: float, max_hops: int,
                     top_k: int) -> list[ScoredPath]:
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
    kept: list[ScoredPath] = []
    for score, nodes, edges in scored:
        if len(kept) == keep:
            break
        key = tuple(sorted(nodes))
        if key not in seen:
            seen.add(key)
            kept.append(ScoredPath(nodes, edges, score, len(edges), nodes[0], nodes[-1]))
    return kept
