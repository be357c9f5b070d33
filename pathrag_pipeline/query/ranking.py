"""Passage ranking for path mode: graph evidence (personalised PageRank) fused with text retrievers.

Three parameter-light pieces, each a standard method with its standard constant:

* :func:`rrf` — reciprocal rank fusion (Cormack, Clarke & Buettcher 2009): ``score(d) = sum over rankings of
  1 / (RRF_K + rank(d))`` with ranks from 1 and ``RRF_K = 60``, the paper's constant. Rank-based, so scores of
  different scales (BM25, cosine, PageRank) need no calibration.
* :func:`personalised_pagerank` — PageRank with restart to the query's entities over the entity-passage graph
  (entities linked by their relations, each entity linked to the passages it was extracted from), damping
  ``PPR_DAMPING = 0.85`` (Page et al. 1999; HippoRAG uses 0.5, we keep the textbook value). A walk reaches the
  bridge entities and passages between the seeds; hubs are diluted by their degree (transition 1/deg).
* The restart distribution: seed entity of retrieval rank r (from 0) weighs ``1 / (1 + r)`` (the harmonic
  weight the seed ranking already used); each node of a kept path adds its path's reliability relative to the
  best kept path, divided by the path's rank (so the paper's reliability, Eq. 4, decides how much a path adds).

The prompt's path order is not touched by any of this; it only ranks the passages returned with the answer
(and scored by ``pathrag eval retrieval``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

RRF_K = 60
PPR_DAMPING = 0.85
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
        chunk_ids: dict[str, int] = {}
        ent, chk = [], []
        for e, chunks in enumerate(entity_chunks):
            for c in chunks:
                ent.append(e)
                chk.append(entity_count + chunk_ids.setdefault(c, len(chunk_ids)))
        self.entity_count = entity_count
        self.chunk_keys = list(chunk_ids)
        self.chunk_index = chunk_ids
        n = entity_count + len(chunk_ids)
        src = np.concatenate([np.asarray(relation_src, dtype=np.int64), np.asarray(relation_tgt, dtype=np.int64),
                              np.asarray(ent, dtype=np.int64), np.asarray(chk, dtype=np.int64)])
        dst = np.concatenate([np.asarray(relation_tgt, dtype=np.int64), np.asarray(relation_src, dtype=np.int64),
                              np.asarray(chk, dtype=np.int64), np.asarray(ent, dtype=np.int64)])
        keep = src != dst
        src, dst = src[keep], dst[keep]
        # one edge per node pair (parallel relations do not count twice)
        pair = np.unique(src * n + dst)
        self.src, self.dst = pair // n, pair % n
        deg = np.bincount(self.src, minlength=n).astype(np.float64)
        self.weight = 1.0 / deg[self.src]
        self.dangling = deg == 0
        self.n = n

    def pagerank(self, restart: np.ndarray, damping: float = PPR_DAMPING) -> np.ndarray:
        """Personalised PageRank by power iteration; dangling nodes restart. ``restart`` sums to 1."""
        r = restart.copy()
        for _ in range(PPR_MAX_ITER):
            spread = np.bincount(self.dst, weights=r[self.src] * self.weight, minlength=self.n)
            nxt = damping * spread + (1.0 - damping + damping * r[self.dangling].sum()) * restart
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


def restart_weights(graph: PassageGraph, seeds: Sequence[tuple[int, int]],
                    paths: Sequence[tuple[int, float, Sequence[int], Sequence[str]]] = (),
                    text: Sequence[str] = ()) -> np.ndarray:
    """Restart distribution over the entity-passage graph, normalised to sum 1.

    * seed entity ``(rank from 0, node)``: 1/(1+rank);
    * text hit (passages ranked for the question text, fused, best first): 1/(1+rank), the same harmonic
      weight, so the best passage weighs as much as the best seed entity;
    * kept path ``(weaker endpoint's seed rank from 0, reliability, nodes, provenance chunks of its relations)``:
      reliability / best reliability / (1 + that rank), spread evenly over the passages that state its
      relations (or over its nodes when they have none). A path is as relevant to the query as its less
      relevant end: it weighs at most what that seed weighs, and a reliable path between the top seeds most.
    """
    w = np.zeros(graph.n, dtype=np.float64)
    for rank, node in seeds:
        w[node] += 1.0 / (1 + rank)
    for rank, chunk in enumerate(dict.fromkeys(text)):
        i = graph.chunk_index.get(chunk)
        if i is not None:
            w[graph.entity_count + i] += 1.0 / (1 + rank)
    best = max((p[1] for p in paths), default=0.0)
    for rank, rel, nodes, chunks in paths:
        share = (rel / best if best > 0 else 1.0) / (1 + rank)
        targets = [graph.entity_count + graph.chunk_index[c] for c in dict.fromkeys(chunks) if c in graph.chunk_index]
        targets = targets or list(dict.fromkeys(nodes))
        for t in targets:
            w[t] += share / len(targets)
    total = w.sum()
    return w / total if total > 0 else w


def graph_passages(snapshot, seeds: Sequence[tuple[int, int]],
                   paths: Sequence[tuple[int, float, Sequence[int], Sequence[str]]], limit: int,
                   text: Sequence[str] = ()) -> list[str]:
    """Passages (chunk ids) by personalised PageRank restarting at the seeds, path evidence and text hits."""
    graph = passage_graph(snapshot)
    restart = restart_weights(graph, seeds, paths, text)
    if restart.sum() == 0 or not graph.chunk_keys:
        return []
    r = graph.pagerank(restart)[graph.entity_count:]
    hits = np.flatnonzero(r > 0)
    order = hits[np.lexsort((hits, -r[hits]))][:limit]
    return [graph.chunk_keys[i] for i in order]
