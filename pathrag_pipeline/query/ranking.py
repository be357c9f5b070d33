"""Passage ranking for path mode: graph evidence (personalised PageRank) fused with text retrievers.

Three parameter-light pieces, each a standard method with its standard constant:

* :func:`rrf` — reciprocal rank fusion (Cormack, Clarke & Buettcher 2009): ``score(d) = sum over rankings of
  1 / (RRF_K + rank(d))`` with ranks from 1 and ``RRF_K = 60``, the paper's constant. Rank-based, so scores of
  different scales (BM25, cosine, PageRank) need no calibration.
* :func:`personalised_pagerank` — PageRank with restart to the query's entities over the entity-passage graph
  (entities linked by their relations, each entity linked to the passages it was extracted from), damping
  ``PPR_DAMPING = 0.85`` (Page et al. 1999; HippoRAG uses 0.5, we keep the textbook value). A walk reaches the
  bridge entities and passages between the seeds; hubs are diluted by their degree (transition 1/deg).
* The restart distribution, one rule for every kind of evidence: an item weighs its similarity to the query
  (by the configured embedder, the same cosine the seed search ranks by) discounted by its rank in its own
  retriever, ``similarity / (1 + rank)``. A seed entity weighs its cosine to the keyword that found it (an
  exact name match counts 1.0); a text hit (passages ranked for the question text) weighs its cosine to the
  question; a kept path weighs its reliability relative to the best kept path (the paper's Eq. 4) times the
  weights of both its end seeds. Weights lie in [0, 1], so the product reads as "both ends are relevant" (an
  AND of independent events) and never exceeds the weaker end; a path between a named entity and a loose
  match adds little, one between two named entities adds most. Rank alone (the earlier
  ``1 / (1 + rank)``) let a loose match found by the whole-question query, or the 40th BM25 hit, restart the
  walk almost as strongly as the entity the question names; the ``unweighted`` ablation keeps it. The weaker
  end alone (``min_ends``, the rule before the product) and HippoRAG's damping 0.5 are ablations too.

This ranker is HippoRAG 2-style (Gutiérrez et al. 2025: PageRank over entities and passages restarting at the
query's entities and passages), not PathRAG's; PathRAG's part is the flow-pruned relational paths in the answer
prompt. They restart the walk here only with ``passages="fused"`` (the path:paths_in_walk ablation, which tied on
musique-100, so it is not the default).

The prompt's path order is not touched by any of this; it only ranks the passages returned with the answer
(and scored by ``pathrag eval retrieval``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from pathrag_pipeline.query.id_lists import IdLists

RRF_K = 60
PPR_DAMPING = 0.85
HIPPORAG_DAMPING = 0.5   # HippoRAG's value: the ``path:damping_0.5`` ablation
PPR_MAX_ITER = 50
PPR_TOL = 1e-8


def rrf(rankings: Iterable[Sequence[str]], k: int = RRF_K, limit: int | None = None) -> list[str]:
    """Reciprocal rank fusion of rankings (best first); ties keep the order of first appearance."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            score[key] = score.get(key, 0.0) + 1.0 / (k + rank)
    order = {key: i for i, key in enumerate(score)}
    out = sorted(score, key=lambda c: (-score[c], order[c]))
    return out if limit is None else out[:limit]


class PassageGraph:
    """The entity-passage graph of a snapshot as a row-normalised sparse transition (CSR in numpy)."""

    def __init__(self, entity_count: int, relation_src: Sequence[int], relation_tgt: Sequence[int],
                 entity_chunks: Sequence[Sequence[str]]) -> None:
        # passage i is node entity_count + i, passages numbered in order of first appearance
        lists = entity_chunks.renumbered() if isinstance(entity_chunks, IdLists) else IdLists.from_rows(entity_chunks)
        ent = lists.rows()
        chk = entity_count + lists.codes.astype(np.int64)
        self.entity_count = entity_count
        self.chunk_keys = lists.names
        self.chunk_index = {c: i for i, c in enumerate(lists.names)}
        n = entity_count + len(lists.names)
        src = np.concatenate([np.asarray(relation_src, dtype=np.int64), np.asarray(relation_tgt, dtype=np.int64),
                              np.asarray(ent, dtype=np.int64), np.asarray(chk, dtype=np.int64)])
        dst = np.concatenate([np.asarray(relation_tgt, dtype=np.int64), np.asarray(relation_src, dtype=np.int64),
                              np.asarray(chk, dtype=np.int64), np.asarray(ent, dtype=np.int64)])
        keep = src != dst
        src, dst = src[keep], dst[keep]
        # one edge per node pair (parallel relations do not count twice)
        pair = np.sort(src * n + dst)   # then distinct (np.unique hashes: several times slower on these)
        pair = pair[np.concatenate(([True], pair[1:] != pair[:-1]))]
        self.src, self.dst = pair // n, pair % n
        deg = np.bincount(self.src, minlength=n).astype(np.float64)
        # a node's share per neighbour, per node (an iteration multiplies n values, then gathers them per edge:
        # the same products as 1 / deg[src] per edge, bit for bit), and the nodes without edges, whose mass restarts
        with np.errstate(divide="ignore"):
            self.inv_degree = np.where(deg > 0, 1.0 / deg, 0.0)
        self.dangling_nodes = np.flatnonzero(deg == 0)
        self.n = n

    def pagerank(self, restart: np.ndarray, damping: float = PPR_DAMPING) -> np.ndarray:
        """Personalised PageRank by power iteration; dangling nodes restart. ``restart`` sums to 1."""
        r = restart.copy()
        for _ in range(PPR_MAX_ITER):
            spread = np.bincount(self.dst, weights=(r * self.inv_degree)[self.src], minlength=self.n)
            nxt = damping * spread + (1.0 - damping + damping * r[self.dangling_nodes].sum()) * restart
            if np.abs(nxt - r).sum() < PPR_TOL:
                r = nxt
                break
            r = nxt
        return r


_graphs: dict[str, tuple[object, PassageGraph]] = {}
_lock = threading.Lock()


def passage_graph(snapshot) -> PassageGraph:
    """The :class:`PassageGraph` of a ``GraphSnapshot``, built once per snapshot."""
    with _lock:
        kept = _graphs.get(snapshot.version)
        if kept is not None and kept[0] is snapshot:
            return kept[1]
    graph = PassageGraph(snapshot.node_count, snapshot.relation_src, snapshot.relation_tgt, snapshot.entity_chunks)
    with _lock:
        _graphs.clear()
        _graphs[snapshot.version] = (snapshot, graph)
    return graph


def item_weight(rank: int, similarity: float) -> float:
    """Restart weight of an item of rank ``rank`` (from 0) in its retriever: its similarity, rank-discounted."""
    return max(similarity, 0.0) / (1 + rank)


def restart_weights(graph: PassageGraph, seeds: Sequence[tuple[int, int, float]],
                    paths: Sequence[tuple[int, int, float, Sequence[int], Sequence[str]]] = (),
                    text: Sequence[tuple[str, float]] = (), *, weighted: bool = True,
                    min_ends: bool = False) -> np.ndarray:
    """Restart distribution over the entity-passage graph, normalised to sum 1.

    * seed entity ``(rank from 0, node, similarity to its keyword)``: :func:`item_weight`;
    * text hit ``(chunk id, similarity to the question)``, best first: :func:`item_weight` of its rank;
    * kept path ``(source seed node, target seed node, reliability, nodes, provenance chunks of its
      relations)``: reliability / best reliability x the product of its two end seeds' weights, spread evenly
      over the passages that state its relations (or over its nodes when they have none).

    ``weighted=False`` counts every similarity as 1 (rank alone). When no seed has a positive similarity
    (an embedder whose cosines are all <= 0 for this query), rank alone is used too, so the walk still starts.
    ``min_ends=True`` weighs a path by the weaker of its end seeds' weights instead of their product (ablation).
    """
    def weight(rank: int, similarity: float) -> float:
        return item_weight(rank, similarity if weighted else 1.0)

    w = np.zeros(graph.n, dtype=np.float64)
    seed_weight: dict[int, float] = {}
    for rank, node, similarity in seeds:
        seed_weight[node] = seed_weight.get(node, 0.0) + weight(rank, similarity)
        w[node] += weight(rank, similarity)
    if weighted and seeds and not any(seed_weight.values()):
        return restart_weights(graph, seeds, paths, text, weighted=False, min_ends=min_ends)
    for rank, (chunk, similarity) in enumerate(dict.fromkeys(text)):
        i = graph.chunk_index.get(chunk)
        if i is not None:
            w[graph.entity_count + i] += weight(rank, similarity)
    best = max((p[2] for p in paths), default=0.0)
    for source, target, rel, nodes, chunks in paths:
        ends = (seed_weight.get(source, 0.0), seed_weight.get(target, 0.0))
        share = (rel / best if best > 0 else 1.0) * (min(ends) if min_ends else ends[0] * ends[1])
        if share <= 0:
            continue
        targets = [graph.entity_count + graph.chunk_index[c] for c in dict.fromkeys(chunks) if c in graph.chunk_index]
        targets = targets or list(dict.fromkeys(nodes))
        for t in targets:
            w[t] += share / len(targets)
    total = w.sum()
    return w / total if total > 0 else w


def graph_passages(snapshot, seeds: Sequence[tuple[int, int, float]],
                   paths: Sequence[tuple[int, int, float, Sequence[int], Sequence[str]]], limit: int,
                   text: Sequence[tuple[str, float]] = (), *, weighted: bool = True, min_ends: bool = False,
                   damping: float = PPR_DAMPING) -> list[str]:
    """Passages (chunk ids) by personalised PageRank (``damping``) restarting at the seeds, path evidence and
    text hits (other arguments as in :func:`restart_weights`)."""
    graph = passage_graph(snapshot)
    restart = restart_weights(graph, seeds, paths, text, weighted=weighted, min_ends=min_ends)
    if restart.sum() == 0 or not graph.chunk_keys:
        return []
    r = graph.pagerank(restart, damping)[graph.entity_count:]
    hits = np.flatnonzero(r > 0)
    order = hits[np.lexsort((hits, -r[hits]))][:limit]
    return [graph.chunk_keys[i] for i in order]
