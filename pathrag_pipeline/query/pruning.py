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
int(#h-hop paths / 2))``. ``query/reference_pruning.py`` implements it (loaded only for this variant) and
says where we had to pick an order.

Both variants return paths best first; the prompt renderer reverses them (the public code and the
paper put the most reliable path last, next to the question).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

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
    if variant == "reference":   # the public code's reading, kept for comparison: loaded only when asked for
        from pathrag_pipeline.query.reference_pruning import reference_paths

        return [ScoredPath(nodes, edges, score, len(edges), nodes[0], nodes[-1]) for nodes, edges, score
                in reference_paths(view, unique, alpha=alpha, threshold=theta, max_hops=max_hops, top_k=top_k)]
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
